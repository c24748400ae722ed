#pragma once
// What a failed OpenSSL call reports: the oldest queued error's text, the queue emptied so the
// next call starts clean. Shared by the listener's and the Redis connection's TLS set-up.

#include <string>

#include <openssl/err.h>

namespace anteroom {

inline std::string OpenSslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown error";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

}  // namespace anteroom
