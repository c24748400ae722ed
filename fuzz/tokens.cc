// What clients hand back to be checked: admission tokens (JWT HS256, EdDSA, ES256), queue
// leases, base64url, and the admin key in an Authorization header. The first byte picks:
//  0: the input verified as a token as is (by a verifier holding an HS256 secret, an EdDSA and
//     an ES256 key, so algorithm confusion between them is reached);
//  1: a token signed with the server's key around the input's header and claims (split at the
//     first '\n'), so the claim checks behind the signature are reached;
//  2: the input as a queue lease of a queue with a job in flight;
//  3: base64url both ways;
//  4: the input as an Authorization header against the admin key (Bearer, Basic);
//  5: the input's header and claims signed with HMAC keyed by the EdDSA public key, which must
//     never verify (HS/EdDSA confusion).
// Anything that verifies must say so consistently: claims of a valid token mint a token that
// verifies to the same claims; a lease that parses names the delivery in flight.

#include <boost/beast/core/string.hpp>
#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "common/base64url.h"
#include "core/hmac.h"
#include "core/queue.h"
#include "core/token.h"
#include "harness.h"
#include "http/router.h"

namespace {

using anteroom::fuzz::Fail;
namespace core = anteroom::core;

constexpr int64_t kNow = 1'700'000'000'000;
constexpr std::string_view kSecret = "fuzz-token-secret";

void CheckVerified(const core::TokenSigner& signer, const core::TokenCheck& check) {
  if (check.problem != core::TokenProblem::kNone && check.problem != core::TokenProblem::kExpired) {
    return;
  }
  if ((check.problem == core::TokenProblem::kExpired) != (kNow / 1000 >= check.claims.exp)) {
    Fail("expiry told wrong");
  }
  // The same claims, minted again, verify to themselves.
  std::string again =
      signer.Mint(check.claims.room, check.claims.incarnation, check.claims.admission, kNow);
  core::TokenCheck back = signer.Verify(again, kNow);
  if (back.problem != core::TokenProblem::kNone || back.claims.room != check.claims.room ||
      back.claims.incarnation != check.claims.incarnation ||
      back.claims.admission != check.claims.admission ||
      back.claims.subject !=
          signer.Subject(check.claims.room, check.claims.incarnation, check.claims.admission)) {
    Fail("claims do not survive a mint", again);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 6;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const auto hs256 = core::TokenKey::Secret(kSecret);
  static const auto eddsa = core::TokenKey::Generate(core::TokenAlg::kEdDSA);
  static const auto es256 = core::TokenKey::Generate(core::TokenAlg::kES256);
  static const core::TokenSigner signer{{hs256, eddsa, es256}, kSecret, 600'000};
  // The header and claims of the input (split at the first '\n') as a signing input.
  auto signing_input = [&](std::string_view default_header) {
    size_t nl = in.find('\n');
    std::string_view header = nl == std::string_view::npos ? default_header : in.substr(0, nl);
    std::string_view claims = nl == std::string_view::npos ? in : in.substr(nl + 1);
    return std::pair<std::string, std::string>(
        std::string(header),
        anteroom::Base64UrlEncode(header) + "." + anteroom::Base64UrlEncode(claims));
  };

  switch (mode) {
    case 0:
      CheckVerified(signer, signer.Verify(in, kNow));
      break;
    case 1: {
      auto [header, token] = signing_input(R"({"alg":"HS256","kid":")" + hs256->kid() + R"("})");
      token += "." + anteroom::Base64UrlEncode(hs256->Sign(token));
      core::TokenCheck check = signer.Verify(token, kNow);
      // Signed by the HS256 key: refused as a bad signature only when the header names another
      // key or algorithm.
      boost::system::error_code ec;
      boost::json::value h = boost::json::parse(header, ec);
      if (check.problem == core::TokenProblem::kBadSignature && !ec && h.is_object()) {
        const auto* alg = h.as_object().if_contains("alg");
        const auto* kid = h.as_object().if_contains("kid");
        if (alg && kid && alg->is_string() && kid->is_string() && alg->as_string() == "HS256" &&
            kid->as_string() == hs256->kid()) {
          Fail("a good signature refused", token);
        }
      }
      CheckVerified(signer, check);
      break;
    }
    case 2: {
      static const core::Hmac lease_key("fuzz-lease-key");
      core::Queue queue("q", lease_key, kNow, 1);
      core::JobSpec job;
      job.payload = "{}";
      queue.Push({job, job}, kNow);
      auto delivered = queue.Fetch("w", 1, 30'000, kNow);
      if (delivered.size() != 1) Fail("no job in flight");
      auto ref = queue.ParseLease(in);
      if (ref && in != delivered[0].lease) {
        // A forged lease can only parse if it names the same delivery under another spelling.
        auto genuine = queue.ParseLease(delivered[0].lease);
        if (!genuine || genuine->id != ref->id || genuine->delivery != ref->delivery) {
          Fail("a forged lease parses", in);
        }
      }
      (void)queue.Ack(in, kNow);
      (void)queue.Nack(in, std::nullopt, "e", kNow);
      (void)queue.Extend(in, 30'000, kNow);
      break;
    }
    case 3: {
      auto decoded = anteroom::Base64UrlDecode(in);
      if (decoded && anteroom::Base64UrlEncode(*decoded) != in) Fail("a non-canonical decode");
      std::string encoded = anteroom::Base64UrlEncode(in);
      auto back = anteroom::Base64UrlDecode(encoded);
      if (!back || *back != in) Fail("base64url does not round-trip", encoded);
      break;
    }
    case 4: {
      bool ok = anteroom::http::HasAdminKey(in, anteroom::fuzz::kAdminKey);
      if (ok && in.find(anteroom::fuzz::kAdminKey) == std::string_view::npos &&
          !boost::beast::iequals(in.substr(0, 6), "Basic ")) {
        Fail("the admin key accepted without the key", in);
      }
      (void)anteroom::http::HasAdminKey(in, "k:e+y/=");
      break;
    }
    case 5: {
      auto [header, token] = signing_input(R"({"alg":"HS256","kid":")" + eddsa->kid() + R"("})");
      static const auto confused = core::TokenKey::Secret(eddsa->PublicJwk());
      token += "." + anteroom::Base64UrlEncode(confused->Sign(token));
      core::TokenCheck check = signer.Verify(token, kNow);
      if (check.problem == core::TokenProblem::kNone ||
          check.problem == core::TokenProblem::kExpired) {
        Fail("an HMAC over the public key verifies", token);
      }
      break;
    }
  }
  return 0;
}
