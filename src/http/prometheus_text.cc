#include "http/prometheus_text.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

namespace anteroom::http {

namespace {

// Backslash and line feed always; the double quote only inside label values (HELP keeps it).
std::string Escape(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) { return Escape(value, true); }

void AppendFamilyHeader(std::string& out, std::string_view name, std::string_view type,
                        std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, Escape(help, false),
                 name, type);
}

void AppendSample(std::string& out, std::string_view name, std::string_view label,
                  std::string_view value, int64_t number) {
  if (label.empty()) {
    fmt::format_to(std::back_inserter(out), "{} {}\n", name, number);
  } else {
    fmt::format_to(std::back_inserter(out), "{}{{{}=\"{}\"}} {}\n", name, label,
                   EscapeLabelValue(value), number);
  }
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

}  // namespace anteroom::http
