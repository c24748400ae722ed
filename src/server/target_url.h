#pragma once
// The rule for a room's `target_url` (where the default waiting page sends admitted people):
// an absolute http/https URL with a host, or a path on the waiting page's own origin ("/shop",
// never "//host", which a browser would read as another origin). At most
// core::kMaxTargetUrlBytes, no control characters, and as RFC 3986 spells it (Boost.URL), so
// what the page redirects to is exactly what the admin saw.

#include <string_view>

#include "common/op_status.h"

namespace anteroom::server {

// Done, or invalid_argument saying what is wrong with `url`.
OpResult<Done> CheckTargetUrl(std::string_view url);

}  // namespace anteroom::server
