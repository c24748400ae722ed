#pragma once
// Test support: reading answers of the HTTP API and asserting their shape.

#include <gtest/gtest.h>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "anteroom/client.hpp"

namespace anteroom::testing {

// A field of a JSON object answer; nullopt when absent, of another type, or not an object.
std::optional<int64_t> IntField(const boost::json::value& v, std::string_view key);
std::optional<std::string> StrField(const boost::json::value& v, std::string_view key);
std::optional<bool> BoolField(const boost::json::value& v, std::string_view key);
// Absent or JSON null.
bool NullOrAbsent(const boost::json::value& v, std::string_view key);

// The "code" of an {"error": {...}} answer.
std::optional<std::string> ErrorCode(const HttpResult& r);

// status == want_status and the body is exactly {"error": {"code": want_code, "message": str}}
// with a non-empty message.
::testing::AssertionResult IsError(const HttpResult& r, int want_status,
                                   std::string_view want_code);

// 200 with a session object of the given status (and the per-status rules on position/token).
::testing::AssertionResult IsSession(const HttpResult& r, std::string_view want_status);

// Polls `done` every `every` until it is true or `timeout` passes; returns its last value.
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout,
             std::chrono::milliseconds every = std::chrono::milliseconds(20));

// The claims of a JWT (its middle part, base64url JSON); null if it does not decode.
boost::json::value JwtClaims(std::string_view token);

// HMAC-SHA256 of data with key, base64url without padding (as a JWT signature).
std::string HmacSha256Base64Url(std::string_view key, std::string_view data);

// Seconds since the epoch, now.
int64_t NowSeconds();

}  // namespace anteroom::testing
