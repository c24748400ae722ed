#include "cmd/log_format.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <ctime>

namespace anteroom::cmd {

namespace {

std::string Rfc3339Utc(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

// The length of the UTF-8 sequence at text[i], or 0 when it is not one (overlong forms,
// surrogates and code points past U+10FFFF are not).
size_t Utf8Length(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n;
  unsigned lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

std::string Line(std::string_view level, std::chrono::system_clock::time_point time,
                 std::string_view message, boost::json::object fields) {
  boost::json::object line;
  line["time"] = Rfc3339Utc(time);
  line["level"] = level;
  line["message"] = ValidUtf8(message);
  for (auto& [key, value] : fields) line[key] = std::move(value);
  return boost::json::serialize(line);
}

}  // namespace

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t n = Utf8Length(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  boost::json::object fields;
  fields["thread"] = msg.thread_id;
  if (msg.logger_name.size() > 0) {
    fields["logger"] = ValidUtf8({msg.logger_name.data(), msg.logger_name.size()});
  }
  if (!msg.source.empty()) {
    fields["source"] = fmt::format("{}:{}", msg.source.filename, msg.source.line);
  }
  auto level = spdlog::level::to_string_view(msg.level);
  std::string line = Line({level.data(), level.size()}, msg.time,
                          {msg.payload.data(), msg.payload.size()}, std::move(fields));
  line += '\n';
  dest.append(line.data(), line.data() + line.size());
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

std::string JsonLogLine(std::string_view level, std::string_view message,
                        boost::json::object fields) {
  return Line(level, std::chrono::system_clock::now(), message, std::move(fields));
}

void UseLogFormat(const std::string& format, const std::string& level) {
  if (format == "json") spdlog::set_formatter(std::make_unique<JsonLogFormatter>());
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace anteroom::cmd
