#pragma once
// Payloads as sent (numbers byte for byte), for the tests of every layer: the payloads whose
// numbers a JSON parser would change, and a reader of the payload text in an answer (not a
// parser: it would turn the numbers into doubles).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace anteroom::testing {

// Payloads sent, and the text stored and returned for them: numbers byte for byte, whitespace
// between tokens gone.
inline const std::vector<std::pair<std::string, std::string>>& ExactPayloads() {
  static const std::vector<std::pair<std::string, std::string>> payloads = {
      {"100000000000000000000001", "100000000000000000000001"},
      {"-100000000000000000000001", "-100000000000000000000001"},
      {"0.1000000000000000055511151231257827", "0.1000000000000000055511151231257827"},
      {"1.5", "1.5"},
      {"1e5", "1e5"},
      {"-0.0", "-0.0"},
      {"-0", "-0"},
      {"1E+2", "1E+2"},
      {R"({"n": [ 1.10, -0 ], "s": "x"})", R"({"n":[1.10,-0],"s":"x"})"},
  };
  return payloads;
}

// The text of the `n`th payload of a fetch or dead-letter answer: what follows "payload": up
// to the next ,"attempt (the field after it in both answers).
inline std::string PayloadText(const std::string& body, size_t n = 0) {
  size_t at = 0;
  for (size_t i = 0; i <= n; ++i) {
    at = body.find(R"("payload":)", i ? at + 1 : 0);
    if (at == std::string::npos) return "(no payload)";
  }
  at += std::string_view(R"("payload":)").size();
  size_t end = body.find(R"(,"attempt)", at);
  return end == std::string::npos ? "(no end)" : body.substr(at, end - at);
}

}  // namespace anteroom::testing
