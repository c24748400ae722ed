#include "support/api_checks.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <thread>

#include "common/base64url.h"

namespace anteroom::testing {

namespace json = boost::json;

namespace {
const json::value* Field(const json::value& v, std::string_view key) {
  if (!v.is_object()) return nullptr;
  return v.as_object().if_contains(key);
}
}  // namespace

std::optional<int64_t> IntField(const json::value& v, std::string_view key) {
  const json::value* f = Field(v, key);
  if (f == nullptr || !f->is_int64()) return std::nullopt;
  return f->as_int64();
}

std::optional<std::string> StrField(const json::value& v, std::string_view key) {
  const json::value* f = Field(v, key);
  if (f == nullptr || !f->is_string()) return std::nullopt;
  return std::string(f->as_string());
}

std::optional<bool> BoolField(const json::value& v, std::string_view key) {
  const json::value* f = Field(v, key);
  if (f == nullptr || !f->is_bool()) return std::nullopt;
  return f->as_bool();
}

bool NullOrAbsent(const json::value& v, std::string_view key) {
  const json::value* f = Field(v, key);
  return f == nullptr || f->is_null();
}

std::optional<std::string> ErrorCode(const HttpResult& r) {
  const json::value* error = Field(r.json, "error");
  return error == nullptr ? std::nullopt : StrField(*error, "code");
}

::testing::AssertionResult IsError(const HttpResult& r, int want_status,
                                   std::string_view want_code) {
  if (!r.error.empty()) return ::testing::AssertionFailure() << "transport error: " << r.error;
  if (r.status != want_status) {
    return ::testing::AssertionFailure()
           << "status " << r.status << ", want " << want_status << "; body: " << r.body;
  }
  if (!r.json.is_object() || r.json.as_object().size() != 1) {
    return ::testing::AssertionFailure() << "body is not {\"error\": ...}: " << r.body;
  }
  const json::value* error = r.json.as_object().if_contains("error");
  if (error == nullptr || !error->is_object() || error->as_object().size() != 2) {
    return ::testing::AssertionFailure() << "\"error\" is not {code, message}: " << r.body;
  }
  auto code = StrField(*error, "code");
  auto message = StrField(*error, "message");
  if (!code || !message || message->empty()) {
    return ::testing::AssertionFailure() << "code/message missing or not strings: " << r.body;
  }
  if (*code != want_code) {
    return ::testing::AssertionFailure()
           << "code " << *code << ", want " << want_code << "; body: " << r.body;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult IsSession(const HttpResult& r, std::string_view want_status) {
  if (!r.error.empty()) return ::testing::AssertionFailure() << "transport error: " << r.error;
  if (r.status != 200) {
    return ::testing::AssertionFailure() << "status " << r.status << "; body: " << r.body;
  }
  auto status = StrField(r.json, "status");
  if (!status || *status != want_status) {
    return ::testing::AssertionFailure()
           << "status field, want " << want_status << "; body: " << r.body;
  }
  for (const char* key : {"waiting", "active", "capacity"}) {
    if (!IntField(r.json, key)) {
      return ::testing::AssertionFailure() << "no integer '" << key << "': " << r.body;
    }
  }
  if (!StrField(r.json, "session")) {
    return ::testing::AssertionFailure() << "no session: " << r.body;
  }
  if (want_status == "waiting") {
    auto position = IntField(r.json, "position");
    if (!position || *position < 1) {
      return ::testing::AssertionFailure() << "waiting without a position >= 1: " << r.body;
    }
    if (!NullOrAbsent(r.json, "token")) {
      return ::testing::AssertionFailure() << "waiting with a token: " << r.body;
    }
  } else if (!NullOrAbsent(r.json, "position")) {
    return ::testing::AssertionFailure() << "a position while not waiting: " << r.body;
  }
  if (want_status == "active") {
    auto token = StrField(r.json, "token");
    if (!token || token->empty()) {
      return ::testing::AssertionFailure() << "active without a token: " << r.body;
    }
  }
  return ::testing::AssertionSuccess();
}

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout,
             std::chrono::milliseconds every) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(every);
  }
}

json::value JwtClaims(std::string_view token) {
  size_t dot1 = token.find('.');
  if (dot1 == std::string_view::npos) return nullptr;
  size_t dot2 = token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos) return nullptr;
  auto payload = Base64UrlDecode(token.substr(dot1 + 1, dot2 - dot1 - 1));
  if (!payload) return nullptr;
  boost::system::error_code ec;
  json::value v = json::parse(*payload, ec);
  if (ec) return nullptr;
  return v;
}

std::string HmacSha256Base64Url(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out,
           &len) == nullptr) {
    return {};
  }
  return Base64UrlEncode(std::string_view(reinterpret_cast<const char*>(out), len));
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace anteroom::testing
