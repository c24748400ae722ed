#pragma once
// How `anteroom serve` writes its logs: text for people, or one JSON object a line for log
// shippers (--log-format json), through spdlog's default logger.

#include <spdlog/formatter.h>
#include <boost/json/object.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace anteroom::cmd {

// One line of JSON: {"time":"2024-05-01T12:00:00.123Z","level":"info","message":...,"thread":N}
// and, where there are any, the fields given. Bytes that are not UTF-8 become U+FFFD, so every
// line parses.
class JsonLogFormatter : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

// The same shape for a line written outside spdlog (the listening line on stdout).
std::string JsonLogLine(std::string_view level, std::string_view message,
                        boost::json::object fields = {});

// Text as JSON strings take it: invalid UTF-8 replaced by U+FFFD.
std::string ValidUtf8(std::string_view text);

// Sets the default logger's format ("text" or "json") and level.
void UseLogFormat(const std::string& format, const std::string& level);

}  // namespace anteroom::cmd
