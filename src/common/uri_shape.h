#pragma once
// What RFC 3986 requires of a URI that Boost.URL 1.81's parser does not check: after an
// authority, the path is empty or starts with '/'. Boost reads "https://shop.example:443evil.com/x"
// as host shop.example, port 443 and the path "evil.com/x" (found by fuzz/webhook_inputs.cc),
// where a browser refuses the URL and a request line would carry a target without its '/'.
// Every parse of an absolute URL the server acts on goes through this as well.

#include <boost/url/url_view.hpp>

namespace anteroom {

inline bool PathFollowsAuthority(const boost::urls::url_view& u) {
  return !u.has_authority() || u.encoded_path().empty() || u.encoded_path().front() == '/';
}

}  // namespace anteroom
