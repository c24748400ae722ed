#pragma once
// Times on the wire as RFC 3339 text (section 5.6, "date-time"), read and written in ms since
// the epoch, bounded to the engine's times: [0, kLatestWireTimeMs] (= core::kLatestTimeMs), i.e.
// from 1970-01-01T00:00:00Z to 3000-01-01T00:00:00Z, both included.
//
// What ParseRfc3339Ms reads, exactly:
//
//   YYYY-MM-DD "T" hh:mm:ss [ "." 1-9 digits ] ( "Z" | ("+" / "-") hh:mm )
//
//  - every field has its fixed number of digits (a four-digit year, no sign, no week or
//    ordinal dates, no space instead of "T"); "t" and "z" are read as "T" and "Z" (RFC 3339
//    5.6 allows both cases);
//  - the calendar is checked (2026-02-29 and 2026-04-31 are refused, 2024-02-29 is read);
//    hours 00-23, minutes and seconds 00-59;
//  - a leap second (ss = 60) is refused: the engine counts POSIX time, which has no name for
//    it, and no event needs to start inside one;
//  - fractional seconds: one to nine digits; those past the millisecond are dropped (truncated,
//    so a time never moves later: "...:00.2509Z" is 250 ms past the second). Nine digits
//    take what Go and Python write (ns and us); more are refused;
//  - the offset: hours 00-23, minutes 00-59; "-00:00" (RFC 3339's "offset unknown") and "Z" are
//    both UTC. The time read is the instant named, in UTC;
//  - nothing before or after (no whitespace), at most 35 bytes.
//
// The calendar and offset arithmetic is Howard Hinnant's date library (date::parse, as GCC 12's
// libstdc++ has no std::chrono::parse; docs/design.md says why this dependency); the fixed
// shape is checked here first, as date::parse alone reads "2026-1-1" and "+01:60".

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace anteroom {

// core::kLatestTimeMs (core/room_types.h), restated here as common/ includes nothing of core/;
// server/event_json.cc holds the two equal.
inline constexpr int64_t kLatestWireTimeMs = 32'503'680'000'000;  // 3000-01-01T00:00:00Z

// The longest text ParseRfc3339Ms reads: "YYYY-MM-DDThh:mm:ss.nnnnnnnnn+hh:mm".
inline constexpr size_t kMaxRfc3339Bytes = 35;

// The time `text` names, in ms since the epoch; nullopt when it is not a time as above, or lies
// outside [0, kLatestWireTimeMs].
std::optional<int64_t> ParseRfc3339Ms(std::string_view text);

// `ms` as RFC 3339 in UTC with milliseconds, always 24 bytes: "2026-12-01T09:00:00.250Z" (so
// such texts sort as their times do). ParseRfc3339Ms reads it back to `ms`. A time outside
// [0, kLatestWireTimeMs] is written as the nearer bound.
std::string FormatRfc3339Ms(int64_t ms);

}  // namespace anteroom
