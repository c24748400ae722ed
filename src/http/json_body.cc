#include "http/json_body.h"

#include <boost/json/parse.hpp>

#include "common/names.h"
#include "common/wire_errors.h"

namespace anteroom::http {

namespace json = boost::json;

OpResult<json::object> ParseObject(std::string_view body, bool empty_is_object,
                                   json::storage_ptr storage) {
  if (body.empty() && empty_is_object) return json::object(storage);
  boost::system::error_code ec;
  json::value v = json::parse(body, ec, storage);
  if (ec) return {OpStatus::kInvalidJson, wire::NotJson(ec.message())};
  if (!v.is_object()) return {OpStatus::kInvalidJson, std::string(wire::kNotAnObject)};
  return std::move(v.as_object());
}

namespace {
OpResult<std::optional<int64_t>> IntValue(const json::value& v, std::string_view key, int64_t min,
                                          int64_t max) {
  int64_t n;
  if (v.is_int64()) {
    n = v.as_int64();
  } else if (v.is_uint64()) {
    n = INT64_MAX;  // above every range we accept
  } else {
    return {OpStatus::kInvalidArgument, wire::NotAnInteger(key)};
  }
  if (n < min || n > max) {
    return {OpStatus::kInvalidArgument, wire::IntegerOutOfRange(key, min, max)};
  }
  return std::optional<int64_t>(n);
}
}  // namespace

OpResult<std::optional<int64_t>> ReadInt(const json::object& o, std::string_view key, int64_t min,
                                         int64_t max) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::optional<int64_t>();
  return IntValue(*v, key, min, max);
}

OpResult<std::optional<std::optional<int64_t>>> ReadNullableInt(const json::object& o,
                                                                std::string_view key, int64_t min,
                                                                int64_t max) {
  using Nullable = std::optional<std::optional<int64_t>>;
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return Nullable();
  if (v->is_null()) return Nullable(std::optional<int64_t>());
  auto n = IntValue(*v, key, min, max);
  if (!n.ok()) return {n.status(), n.message()};
  return Nullable(*n);
}

OpResult<std::optional<bool>> ReadBool(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_bool()) return {OpStatus::kInvalidArgument, wire::NotABoolean(key)};
  return std::optional<bool>(v->as_bool());
}

OpResult<std::optional<std::string>> ReadString(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return {OpStatus::kInvalidArgument, wire::NotAString(key)};
  return std::optional<std::string>(std::string(v->as_string()));
}

OpResult<std::optional<std::string>> ReadName(const json::object& o, std::string_view key) {
  auto s = ReadString(o, key);
  if (!s.ok() || !*s) return s;
  if (!IsValidName(**s)) {
    return {OpStatus::kInvalidArgument, wire::BadNameField(key)};
  }
  return s;
}

}  // namespace anteroom::http
