#pragma once
// ASCII case folding for the protocol's case-insensitive words (host names, origins, header
// names); bytes outside A-Z are kept as they are, whatever the locale.

#include <string>
#include <string_view>

namespace anteroom {

inline std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

inline std::string AsciiUpper(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

}  // namespace anteroom
