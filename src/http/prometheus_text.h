#pragma once
// Writing the Prometheus text exposition format, version 0.0.4: family headers, samples and the
// escaping rules. Only the format; which metrics exist is up to the callers.

#include <cstdint>
#include <string>
#include <string_view>

namespace anteroom::http {

inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// A label value as it goes between the quotes: backslash, double quote and line feed escaped.
std::string EscapeLabelValue(std::string_view value);

// "# HELP name help\n# TYPE name type\n"; help text has backslash and line feed escaped.
void AppendFamilyHeader(std::string& out, std::string_view name, std::string_view type,
                        std::string_view help);

// `name{label="value"} number\n` (value escaped); an empty label writes `name number\n`.
void AppendSample(std::string& out, std::string_view name, std::string_view label,
                  std::string_view value, int64_t number);

// A floating-point sample value: the shortest text that reads back the same double, and
// +Inf, -Inf and NaN spelled as Prometheus spells them.
std::string FormatSampleValue(double value);

}  // namespace anteroom::http
