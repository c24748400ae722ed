#include "server/payload_text.h"

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/serialize.hpp>

#include <cmath>
#include <unordered_map>
#include <utility>

#include "common/wire_errors.h"

namespace anteroom::server {

namespace json = boost::json;

namespace {

struct Numbers {
  bool doubles = false;
  bool zeros = false;  // an integer 0, which may have been sent as -0
  bool non_finite = false;
};

void Scan(const json::value& v, Numbers& n) {
  switch (v.kind()) {
    case json::kind::double_:
      n.doubles = true;
      if (!std::isfinite(v.get_double())) n.non_finite = true;
      break;
    case json::kind::int64:
      if (v.get_int64() == 0) n.zeros = true;
      break;
    case json::kind::array:
      for (const json::value& e : v.get_array()) Scan(e, n);
      break;
    case json::kind::object:
      for (const auto& kv : v.get_object()) Scan(kv.value(), n);
      break;
    default:
      break;
  }
}

std::string Quoted(std::string_view s) { return json::serialize(json::string_view(s)); }

// basic_parser's handler: follows the body's structure, and re-writes each payload as compact
// JSON with the source text of its numbers.
class SourceHandler {
 public:
  static constexpr size_t max_array_size = static_cast<size_t>(-1);
  static constexpr size_t max_object_size = static_cast<size_t>(-1);
  static constexpr size_t max_string_size = static_cast<size_t>(-1);
  static constexpr size_t max_key_size = static_cast<size_t>(-1);

  explicit SourceHandler(TextPlace place) : place_(place) {}

  std::vector<std::string>& texts() { return texts_; }

  bool on_document_begin(boost::system::error_code&) { return true; }
  bool on_document_end(boost::system::error_code&) { return true; }
  bool on_object_begin(boost::system::error_code&) { return Begin(true); }
  bool on_object_end(size_t, boost::system::error_code&) { return End(); }
  bool on_array_begin(boost::system::error_code&) { return Begin(false); }
  bool on_array_end(size_t, boost::system::error_code&) { return End(); }
  bool on_key_part(json::string_view s, size_t, boost::system::error_code&) {
    part_.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, size_t, boost::system::error_code&) {
    part_.append(s.data(), s.size());
    if (!builders_.empty()) {
      builders_.back().key.swap(part_);
    } else if (!levels_.empty()) {
      levels_.back().key.swap(part_);
    }
    part_.clear();
    return true;
  }
  bool on_string_part(json::string_view s, size_t, boost::system::error_code&) {
    part_.append(s.data(), s.size());
    return true;
  }
  bool on_string(json::string_view s, size_t, boost::system::error_code&) {
    part_.append(s.data(), s.size());
    Scalar([this] { return Quoted(part_); });
    part_.clear();
    return true;
  }
  bool on_number_part(json::string_view s, boost::system::error_code&) {
    part_.append(s.data(), s.size());
    return true;
  }
  bool on_int64(int64_t, json::string_view s, boost::system::error_code&) { return Number(s); }
  bool on_uint64(uint64_t, json::string_view s, boost::system::error_code&) { return Number(s); }
  bool on_double(double, json::string_view s, boost::system::error_code&) { return Number(s); }
  bool on_bool(bool b, boost::system::error_code&) {
    Scalar([b] { return std::string(b ? "true" : "false"); });
    return true;
  }
  bool on_null(boost::system::error_code&) {
    Scalar([] { return std::string("null"); });
    return true;
  }
  bool on_comment_part(json::string_view, boost::system::error_code&) { return true; }
  bool on_comment(json::string_view, boost::system::error_code&) { return true; }

 private:
  // A container of the body outside the payloads: only where the next value goes matters.
  struct Level {
    bool object;
    std::string key;   // the current member's (objects)
    size_t count = 0;  // values completed so far (arrays: the index of the next)
  };
  // A container inside a payload being re-written.
  struct Builder {
    explicit Builder(bool is_object) : object(is_object) {}
    bool object;
    std::string key;
    std::string text;  // arrays: the elements so far, comma-separated
    size_t count = 0;
    std::vector<std::pair<std::string, std::string>> members;  // objects: unescaped key, text
    std::unordered_map<std::string, size_t> index;             // key -> place in members
  };

  bool Number(json::string_view s) {
    part_.append(s.data(), s.size());
    Scalar([this] { return part_; });
    part_.clear();
    return true;
  }

  // Which of the place's values the value that begins now is, if it is one.
  std::optional<size_t> Slot() const {
    auto member = [](const Level& l, std::string_view key) { return l.object && l.key == key; };
    size_t depth = 1 + (place_.each ? 1 : 0) + (place_.inner.empty() ? 0 : 1);
    if (levels_.size() != depth || !member(levels_[0], place_.key)) return std::nullopt;
    if (place_.each && levels_[1].object) return std::nullopt;
    if (!place_.inner.empty() && !member(levels_.back(), place_.inner)) return std::nullopt;
    return place_.each ? levels_[1].count : 0;
  }

  // A value begins outside any of the place's values.
  void Outside() {
    // A repeated array member replaces the earlier one, as boost::json::parse keeps the last.
    if (place_.each && levels_.size() == 1 && levels_[0].object && levels_[0].key == place_.key) {
      texts_.clear();
    }
  }

  template <class Text>
  void Scalar(Text text) {
    if (!builders_.empty()) return Put(text());
    if (auto slot = Slot()) {
      slot_ = *slot;
      return Put(text());
    }
    Outside();
    Completed();
  }

  bool Begin(bool object) {
    if (builders_.empty()) {
      if (auto slot = Slot()) {
        slot_ = *slot;
      } else {
        Outside();
        levels_.push_back(Level{.object = object, .key = {}, .count = 0});
        return true;
      }
    }
    builders_.emplace_back(object);
    return true;
  }

  bool End() {
    if (builders_.empty()) {
      if (!levels_.empty()) levels_.pop_back();
      Completed();
      return true;
    }
    Builder b = std::move(builders_.back());
    builders_.pop_back();
    std::string text;
    if (!b.object) {
      text.reserve(b.text.size() + 2);
      text.append(1, '[').append(b.text).append(1, ']');
    } else {
      text = "{";
      for (size_t i = 0; i < b.members.size(); ++i) {
        if (i) text += ',';
        text.append(Quoted(b.members[i].first)).append(1, ':').append(b.members[i].second);
      }
      text += '}';
    }
    Put(std::move(text));
    return true;
  }

  // A value of the payload being re-written is complete.
  void Put(std::string text) {
    if (builders_.empty()) {  // the payload itself
      if (texts_.size() <= slot_) texts_.resize(slot_ + 1);
      texts_[slot_] = std::move(text);  // a repeated "payload": the last one, as parse keeps
      Completed();
      return;
    }
    Builder& b = builders_.back();
    if (!b.object) {
      if (b.count++) b.text += ',';
      b.text += text;
      return;
    }
    auto [at, fresh] = b.index.try_emplace(b.key, b.members.size());
    if (fresh) {
      b.members.emplace_back(std::move(b.key), std::move(text));
    } else {
      b.members[at->second].second = std::move(text);  // the last value, in the first's place
    }
  }

  void Completed() {
    if (!levels_.empty()) ++levels_.back().count;
  }

  TextPlace place_;
  std::vector<Level> levels_;
  std::vector<Builder> builders_;
  std::string part_;  // the key, string or number read so far
  size_t slot_ = 0;   // the job of the payload being re-written
  std::vector<std::string> texts_;
};

}  // namespace

std::optional<std::vector<std::string>> SourcePayloadTexts(std::string_view body, bool batch) {
  return SourceTexts(body, batch ? kJobPayloads : kOnePayload);
}

std::optional<std::vector<std::string>> SourceTexts(std::string_view body, TextPlace place) {
  json::basic_parser<SourceHandler> parser(json::parse_options{}, place);
  boost::system::error_code ec;
  size_t used = parser.write_some(false, body.data(), body.size(), ec);
  if (ec || used != body.size()) return std::nullopt;
  return std::move(parser.handler().texts());
}

OpResult<std::string> PayloadTexts::Of(const json::value& payload, size_t index) {
  Numbers n;
  Scan(payload, n);
  if (n.non_finite) return {OpStatus::kInvalidArgument, std::string(wire::kPayloadNotFinite)};
  if (n.zeros && !minus_zero_) minus_zero_ = body_.find("-0") != std::string_view::npos;
  bool exact = !n.doubles && !(n.zeros && *minus_zero_);
  if (exact) return json::serialize(payload);
  if (!from_source_) {
    auto texts = SourceTexts(body_, place_);
    from_source_ = texts ? std::move(*texts) : std::vector<std::string>();
  }
  if (index >= from_source_->size() || (*from_source_)[index].empty()) {
    return {OpStatus::kInternal, std::string(wire::kPayloadTextLost)};
  }
  return (*from_source_)[index];
}

bool HoldsNonFinite(const boost::json::value& v) {
  if (v.is_double()) return !std::isfinite(v.as_double());
  if (v.is_array()) {
    for (const boost::json::value& e : v.as_array()) {
      if (HoldsNonFinite(e)) return true;
    }
  }
  if (v.is_object()) {
    for (const auto& e : v.as_object()) {
      if (HoldsNonFinite(e.value())) return true;
    }
  }
  return false;
}

}  // namespace anteroom::server
