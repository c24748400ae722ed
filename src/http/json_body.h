#pragma once
// Reading request bodies: JSON objects and typed fields with their wire ranges. Every reader
// returns invalid_argument naming the field, so a bad request changes nothing.

#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/op_status.h"

namespace anteroom::http {

// An empty body reads as {} when empty_is_object. `storage` lets hot handlers parse into a
// stack buffer (boost::json::monotonic_resource) instead of the heap.
OpResult<boost::json::object> ParseObject(std::string_view body, bool empty_is_object,
                                          boost::json::storage_ptr storage = {});

// Absent (or, for the nullable reader, null) fields read as nullopt.
OpResult<std::optional<int64_t>> ReadInt(const boost::json::object& o, std::string_view key,
                                         int64_t min, int64_t max);
// Absent: nullopt. Present: the inner optional is nullopt for JSON null.
OpResult<std::optional<std::optional<int64_t>>> ReadNullableInt(const boost::json::object& o,
                                                                std::string_view key, int64_t min,
                                                                int64_t max);
OpResult<std::optional<bool>> ReadBool(const boost::json::object& o, std::string_view key);
OpResult<std::optional<std::string>> ReadString(const boost::json::object& o, std::string_view key);
// A string that follows the naming rule (1-128 bytes of [A-Za-z0-9._:-]).
OpResult<std::optional<std::string>> ReadName(const boost::json::object& o, std::string_view key);

}  // namespace anteroom::http
