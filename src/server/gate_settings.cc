#include "server/gate_settings.h"

#include <boost/beast/core/string.hpp>
#include <boost/json.hpp>

#include <fnmatch.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>

#include "common/ascii.h"
#include "common/wire_errors.h"
#include "server/http_names.h"

namespace anteroom::server {

namespace json = boost::json;

namespace {

bool IsCookieName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::isalnum(c) != 0 || c == '_' || c == '-'; });
}

// A host name or address as it stands in a URL's authority, with an optional port.
bool IsHost(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
  });
}

// A glob of visible ASCII (spaces allowed inside header values), bounded.
bool IsPattern(std::string_view s, bool spaces) {
  if (s.empty() || s.size() > kMaxGatePatternBytes) return false;
  return std::all_of(s.begin(), s.end(), [spaces](unsigned char c) {
    return (c > 0x20 && c < 0x7f) || (spaces && c == ' ');
  });
}

// An HTTP field name (RFC 9110 5.1: a token).
bool IsFieldName(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) != 0 ||
           std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  });
}

OpResult<json::array> StringList(const json::object& o, std::string_view key, size_t max,
                                 bool (*valid)(std::string_view), std::string_view what) {
  json::array out;
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return out;
  if (!v->is_array() || v->as_array().size() > max) {
    return {OpStatus::kInvalidArgument, wire::GateListShape(key, max, what)};
  }
  for (const json::value& item : v->as_array()) {
    if (!item.is_string() || !valid(item.as_string())) {
      return {OpStatus::kInvalidArgument, wire::GateListShape(key, max, what)};
    }
    out.emplace_back(item.as_string());
  }
  return out;
}

bool IsPathPattern(std::string_view s) { return !s.empty() && IsPattern(s, false); }

constexpr std::string_view kDigestPrefix = "sha256:";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "sha256:" and 64 hex digits: a header secret kept as its digest. The raw 32 bytes, or
// nullopt for any other text.
std::optional<std::string> DigestOfText(std::string_view text) {
  if (!text.starts_with(kDigestPrefix) || text.size() != kDigestPrefix.size() + 64) {
    return std::nullopt;
  }
  std::string raw;
  for (size_t i = kDigestPrefix.size(); i < text.size(); i += 2) {
    int hi = HexValue(text[i]);
    int lo = HexValue(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    raw += static_cast<char>(hi * 16 + lo);
  }
  return raw;
}

std::string DigestText(std::string_view raw) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(kDigestPrefix);
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

// A header rule's value with a glob character is a pattern (a crawler's User-Agent); without
// one it is an exact value, a shared secret.
bool IsGlob(std::string_view value) { return value.find_first_of("*?[") != std::string_view::npos; }

}  // namespace

std::optional<std::string> NormalPath(std::string_view raw) {
  if (raw.empty() || raw.front() != '/') return std::nullopt;
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(raw[i]);
    if (c == '\\' || c == '#' || c == ';' || c == '?' || c <= 0x20 || c == 0x7f) {
      return std::nullopt;  // '?': not a path (the query is cut off before)
    }
    if (c != '%') {
      out += static_cast<char>(c);
      continue;
    }
    if (i + 2 >= raw.size()) return std::nullopt;
    const int hi = HexValue(raw[i + 1]);
    const int lo = HexValue(raw[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    const auto d = static_cast<unsigned char>(hi * 16 + lo);
    // What a server may read as structure once decoded (a dot segment, another segment, a
    // query or fragment, a parameter, an escape to decode twice), or a control byte.
    if (d == '.' || d == '/' || d == '\\' || d == '%' || d == '?' || d == '#' || d == ';' ||
        d < 0x20 || d == 0x7f) {
      return std::nullopt;
    }
    out += static_cast<char>(d);
    i += 2;
  }
  // Segments: none empty (a server may merge "//" or not) but a trailing one, none "." or "..".
  size_t start = 1;
  while (true) {
    const size_t end = out.find('/', start);
    const std::string_view segment =
        std::string_view(out).substr(start, end == std::string::npos ? end : end - start);
    if (segment == "." || segment == "..") return std::nullopt;
    if (end == std::string::npos) break;
    if (segment.empty()) return std::nullopt;
    start = end + 1;
  }
  return out;
}

std::string GateSettings::CookieName(std::string_view room, bool secure) const {
  if (!cookie.empty()) return cookie;
  std::string name = secure && cookie_domain.empty() ? "__Host-anteroom_" : "anteroom_";
  // Room names hold [A-Za-z0-9._:-]; cookie names here [A-Za-z0-9_-]. One to one: '_' is the
  // escape, so no two rooms share a name.
  for (char c : room) {
    if (c == '_') {
      name += "__";
    } else if (c == '.') {
      name += "_d";
    } else if (c == ':') {
      name += "_c";
    } else {
      name += c;
    }
  }
  return name;
}

bool GateSettings::BypassesPath(std::string_view raw_path) const {
  if (bypass_paths.empty()) return false;
  std::optional<std::string> p = NormalPath(raw_path);
  if (!p) return false;
  for (const std::string& pattern : bypass_paths) {
    if (pattern.back() == '/' && pattern.find('*') == std::string::npos) {
      if (p->starts_with(pattern)) return true;
    } else if (fnmatch(pattern.c_str(), p->c_str(), 0) == 0) {
      return true;
    }
  }
  return false;
}

bool GateSettings::BypassesHeader(std::string_view name, std::string_view value) const {
  // Called for every field of a gated request: nothing is allocated unless a name matches.
  for (const auto& [rule_name, glob] : bypass_headers) {
    if (!boost::beast::iequals(rule_name, name)) continue;
    if (fnmatch(glob.c_str(), std::string(value).c_str(), FNM_CASEFOLD) == 0) return true;
  }
  for (const auto& [rule_name, digest] : bypass_header_digests) {
    if (!boost::beast::iequals(rule_name, name)) continue;
    const std::string given = KeyDigest(value);
    if (given.size() == digest.size() &&
        CRYPTO_memcmp(given.data(), digest.data(), digest.size()) == 0) {
      return true;
    }
  }
  return false;
}

OpResult<std::string> CanonicalGateText(const json::value& gate) {
  if (!gate.is_object()) return {OpStatus::kInvalidArgument, std::string(wire::kGateShape)};
  const json::object& o = gate.as_object();
  for (const auto& member : o) {
    std::string_view k = member.key();
    if (k != "cookie" && k != "cookie_domain" && k != "hosts" && k != "bypass") {
      return {OpStatus::kInvalidArgument, std::string(wire::kGateShape)};
    }
  }
  json::object out;
  if (const json::value* c = o.if_contains("cookie")) {
    if (!c->is_string() || !IsCookieName(c->as_string())) {
      return {OpStatus::kInvalidArgument, std::string(wire::kGateCookieName)};
    }
    out["cookie"] = c->as_string();
  }
  if (const json::value* d = o.if_contains("cookie_domain")) {
    if (!d->is_string() || !IsHost(d->as_string()) ||
        d->as_string().find(':') != json::string::npos) {
      return {OpStatus::kInvalidArgument, std::string(wire::kGateCookieDomain)};
    }
    out["cookie_domain"] = AsciiLower(d->as_string());
  }
  auto hosts = StringList(o, "hosts", kMaxGateHosts, IsHost, "host names");
  if (!hosts.ok()) return {hosts.status(), hosts.message()};
  for (json::value& h : *hosts) h = AsciiLower(h.as_string());
  out["hosts"] = std::move(*hosts);
  json::object bypass_out;
  if (const json::value* b = o.if_contains("bypass")) {
    if (!b->is_object()) return {OpStatus::kInvalidArgument, std::string(wire::kGateShape)};
    for (const auto& member : b->as_object()) {
      if (member.key() != "paths" && member.key() != "headers") {
        return {OpStatus::kInvalidArgument, std::string(wire::kGateShape)};
      }
    }
    auto paths = StringList(b->as_object(), "paths", kMaxGatePaths, IsPathPattern, "path globs");
    if (!paths.ok()) return {paths.status(), paths.message()};
    bypass_out["paths"] = std::move(*paths);
    json::object headers_out;
    if (const json::value* h = b->as_object().if_contains("headers")) {
      if (!h->is_object() || h->as_object().size() > kMaxGateHeaders) {
        return {OpStatus::kInvalidArgument, std::string(wire::kGateHeaders)};
      }
      for (const auto& member : h->as_object()) {
        if (!IsFieldName(member.key()) || !member.value().is_string() ||
            !IsPattern(member.value().as_string(), true)) {
          return {OpStatus::kInvalidArgument, std::string(wire::kGateHeaders)};
        }
        std::string_view value = member.value().as_string();
        std::string stored(value);
        if (!DigestOfText(value) && !IsGlob(value)) stored = DigestText(KeyDigest(value));
        headers_out[AsciiLower(member.key())] = stored;
      }
    }
    bypass_out["headers"] = std::move(headers_out);
  } else {
    bypass_out["paths"] = json::array();
    bypass_out["headers"] = json::object();
  }
  out["bypass"] = std::move(bypass_out);
  return json::serialize(out);
}

std::shared_ptr<const GateSettings> ParseGateText(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return nullptr;
  auto out = std::make_shared<GateSettings>();
  const json::object& o = v.as_object();
  try {
    if (const json::value* c = o.if_contains("cookie")) out->cookie = c->as_string();
    if (const json::value* d = o.if_contains("cookie_domain")) out->cookie_domain = d->as_string();
    if (const json::value* h = o.if_contains("hosts")) {
      for (const json::value& host : h->as_array()) out->hosts.emplace_back(host.as_string());
    }
    if (const json::value* b = o.if_contains("bypass")) {
      for (const json::value& p : b->at("paths").as_array()) {
        out->bypass_paths.emplace_back(p.as_string());
      }
      for (const auto& member : b->at("headers").as_object()) {
        std::string_view value = member.value().as_string();
        if (std::optional<std::string> digest = DigestOfText(value)) {
          out->bypass_header_digests.emplace_back(std::string(member.key()), std::move(*digest));
        } else {
          out->bypass_headers.emplace_back(std::string(member.key()), std::string(value));
        }
      }
    }
  } catch (const std::exception&) {
    return nullptr;  // not written by CanonicalGateText
  }
  return out;
}

json::value GateJson(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  return ec ? json::value(nullptr) : v;
}

}  // namespace anteroom::server
