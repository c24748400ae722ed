// Proof-of-work puzzles (core/challenge.h): a right proof counts its bits; wrong, expired,
// replayed for another session, for another room, or from another secret does not.
#include "core/challenge.h"

#include <gtest/gtest.h>

#include <string>

#include "common/base64url.h"

namespace anteroom::core {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;
const std::string kRandom(PowPuzzles::kRandomBytes, '\x5a');

// Finds a solution with at least `bits` leading zero bits (a few thousand hashes at 10 bits).
std::string Solve(const std::string& nonce, int bits) {
  for (uint64_t i = 0;; ++i) {
    std::string s = std::to_string(i);
    if (LeadingZeroBits(Sha256(nonce + s)) >= bits) return s;
  }
}

TEST(ChallengeTest, LeadingZeroBitsCountsAcrossBytes) {
  EXPECT_EQ(LeadingZeroBits(std::string("\x80", 1)), 0);
  EXPECT_EQ(LeadingZeroBits(std::string("\x01", 1)), 7);
  EXPECT_EQ(LeadingZeroBits(std::string("\x00\x00\x10", 3)), 19);
  EXPECT_EQ(LeadingZeroBits(std::string(4, '\0')), 32);
  // SHA-256("abc") = ba7816bf...: no leading zero bit.
  EXPECT_EQ(LeadingZeroBits(Sha256("abc")), 0);
  EXPECT_EQ(Base64UrlEncode(Sha256("abc")), "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0");
}

TEST(ChallengeTest, ARightProofCountsItsBits) {
  PowPuzzles puzzles("secret");
  auto p = puzzles.Issue("launch", "ann", kNow, kRandom);
  EXPECT_EQ(p.expires_ms, kNow + PowPuzzles::kLifetimeMs);
  EXPECT_EQ(p.nonce.size(), 48u);
  std::string solution = Solve(p.nonce, 10);
  auto proof = puzzles.Check("launch", "ann", p.nonce, solution, kNow + 1'000);
  EXPECT_EQ(proof.problem, PowPuzzles::Problem::kNone);
  EXPECT_GE(proof.bits, 10);
  EXPECT_EQ(proof.bits, LeadingZeroBits(Sha256(p.nonce + solution)));
  // Another process with the same secret verifies it too: nothing is remembered.
  PowPuzzles other("secret");
  EXPECT_EQ(other.Check("launch", "ann", p.nonce, solution, kNow + 1'000).bits, proof.bits);
  // The same room and session with the same random bytes: the same puzzle (pure function).
  EXPECT_EQ(puzzles.Issue("launch", "ann", kNow, kRandom).nonce, p.nonce);
}

TEST(ChallengeTest, AWrongSolutionShowsLittleWork) {
  PowPuzzles puzzles("secret");
  auto p = puzzles.Issue("launch", "ann", kNow, kRandom);
  std::string solution = Solve(p.nonce, 12);
  // Searching for a solution that does not reach 12 bits: its bit count is what it is.
  std::string weak;
  for (uint64_t i = 0;; ++i) {
    weak = "w" + std::to_string(i);
    if (LeadingZeroBits(Sha256(p.nonce + weak)) < 4) break;
  }
  auto proof = puzzles.Check("launch", "ann", p.nonce, weak, kNow);
  EXPECT_EQ(proof.problem, PowPuzzles::Problem::kNone);
  EXPECT_LT(proof.bits, 4);
}

TEST(ChallengeTest, ExpiredOtherRoomOtherSessionOtherSecretAreRefused) {
  PowPuzzles puzzles("secret");
  auto p = puzzles.Issue("launch", "ann", kNow, kRandom);
  std::string solution = Solve(p.nonce, 8);
  using P = PowPuzzles::Problem;
  EXPECT_EQ(puzzles.Check("launch", "ann", p.nonce, solution, p.expires_ms - 1).problem, P::kNone);
  EXPECT_EQ(puzzles.Check("launch", "ann", p.nonce, solution, p.expires_ms).problem, P::kExpired);
  // Replayed for another session, or in another room: the tag does not match.
  EXPECT_EQ(puzzles.Check("launch", "bob", p.nonce, solution, kNow).problem, P::kForged);
  EXPECT_EQ(puzzles.Check("other", "ann", p.nonce, solution, kNow).problem, P::kForged);
  // Name boundaries are part of the tag: ("la", "unchann") is not ("launch", "ann").
  EXPECT_EQ(puzzles.Check("launcha", "nn", p.nonce, solution, kNow).problem, P::kForged);
  EXPECT_EQ(PowPuzzles("other-secret").Check("launch", "ann", p.nonce, solution, kNow).problem,
            P::kForged);
}

TEST(ChallengeTest, TamperedNoncesAreRefused) {
  PowPuzzles puzzles("secret");
  auto p = puzzles.Issue("launch", "ann", kNow, kRandom);
  using P = PowPuzzles::Problem;
  // A later expiry written into the nonce breaks the tag.
  std::string raw = *Base64UrlDecode(p.nonce);
  raw[2] = static_cast<char>(raw[2] + 1);
  std::string later = Base64UrlEncode(raw);
  EXPECT_EQ(puzzles.Check("launch", "ann", later, "1", kNow).problem, P::kForged);
  // Any changed character of the tag part.
  std::string flipped = p.nonce;
  flipped[40] = flipped[40] == 'A' ? 'B' : 'A';
  EXPECT_EQ(puzzles.Check("launch", "ann", flipped, "1", kNow).problem, P::kForged);
  for (const std::string& bad : {std::string(), p.nonce.substr(1), p.nonce + "A",
                                 std::string(48, '!'), std::string(48, '=')}) {
    EXPECT_EQ(puzzles.Check("launch", "ann", bad, "1", kNow).problem, P::kMalformed) << bad;
  }
  for (const std::string& bad :
       {std::string(), std::string(65, '1'), std::string("a b"), std::string("\xff")}) {
    EXPECT_EQ(puzzles.Check("launch", "ann", p.nonce, bad, kNow).problem, P::kMalformed) << bad;
  }
  EXPECT_EQ(puzzles.Check("launch", "ann", p.nonce, std::string(64, '1'), kNow).problem, P::kNone);
}

}  // namespace
}  // namespace anteroom::core
