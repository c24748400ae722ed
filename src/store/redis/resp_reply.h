#pragma once
// A Redis reply as plain data (converted from hiredis's reader), plus transport failures: a
// command that never got an answer because the connection failed or timed out.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace anteroom::store::redis {

struct Reply {
  enum class Type : uint8_t { kNil, kInteger, kString, kStatus, kError, kArray, kTransport };
  Type type = Type::kNil;
  int64_t integer = 0;
  std::string str;  // string, status, error text, or what went wrong with the transport
  std::vector<Reply> elements;

  static Reply Transport(std::string what) {
    Reply r;
    r.type = Type::kTransport;
    r.str = std::move(what);
    return r;
  }
  bool failed() const { return type == Type::kError || type == Type::kTransport; }
  bool IsError(std::string_view prefix) const {
    return type == Type::kError && std::string_view(str).substr(0, prefix.size()) == prefix;
  }
  // Integers and integer-looking strings; 0 otherwise.
  int64_t AsInt() const;
  const Reply& at(size_t i) const;
};

}  // namespace anteroom::store::redis
