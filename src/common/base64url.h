#pragma once
// base64url (RFC 4648 section 5) without padding, as JWT uses it.

#include <optional>
#include <string>
#include <string_view>

namespace anteroom {

std::string Base64UrlEncode(std::string_view bytes);
// nullopt on any character outside the alphabet or an impossible length.
std::optional<std::string> Base64UrlDecode(std::string_view text);

}  // namespace anteroom
