#include "server/target_url.h"

#include <boost/url/parse.hpp>

#include "common/uri_shape.h"
#include "common/wire_errors.h"
#include "core/room_types.h"

namespace anteroom::server {

namespace urls = boost::urls;

namespace {
OpResult<Done> Refuse(std::string_view why) {
  return {OpStatus::kInvalidArgument, wire::TargetUrlRefused(why)};
}
}  // namespace

OpResult<Done> CheckTargetUrl(std::string_view url) {
  if (url.size() > core::kMaxTargetUrlBytes) {
    return {OpStatus::kInvalidArgument, wire::TargetUrlTooLong(core::kMaxTargetUrlBytes)};
  }
  for (char c : url) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return {OpStatus::kInvalidArgument, std::string(wire::kTargetUrlControl)};
    }
  }
  if (url.empty()) return Refuse("it is empty");
  if (url.front() == '/') {
    // A relative reference: "//host/..." has an authority, so it names another origin.
    auto ref = urls::parse_relative_ref(url);
    if (!ref) return Refuse("not a valid path: " + ref.error().message());
    if (ref->has_authority()) return Refuse("'//' starts another host, not a path");
    return Done{};
  }
  auto uri = urls::parse_uri(url);
  if (!uri) return Refuse("not a valid URL: " + uri.error().message());
  if (uri->scheme_id() != urls::scheme::http && uri->scheme_id() != urls::scheme::https) {
    return Refuse("the scheme is '" + std::string(uri->scheme()) + "'");
  }
  if (!uri->has_authority() || uri->encoded_host().empty()) return Refuse("it has no host");
  if (!PathFollowsAuthority(*uri)) return Refuse("the port must be digits, then '/' or nothing");
  // "https://shop.example@evil.example/" goes to evil.example: no reason to allow the confusion.
  if (uri->has_userinfo()) return Refuse("a user name or password is not allowed in it");
  return Done{};
}

}  // namespace anteroom::server
