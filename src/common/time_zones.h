#pragma once
// Time zones by IANA name ("Europe/Berlin"), from the system's tzdata (/usr/share/zoneinfo,
// Debian's `tzdata`) through Howard Hinnant's tz library (`date/tz.h`, Debian's libdate-tz,
// built to read the OS database). The first look-up reads the database; zones live as long as
// the process, so the pointer answered may be kept.
//
// What the library does not know: it reads each zone's listed transitions and not the rule
// that continues them (the TZif footer), so past the last listed one (2037 in Debian's files)
// a zone keeps the offset it had then, standard time in Europe and North America.

#include <date/tz.h>

#include <cstddef>
#include <string_view>

#include "common/op_status.h"

namespace anteroom {

// IANA names are at most 30 bytes today; this leaves room and bounds what a request can ask.
inline constexpr size_t kMaxTimeZoneNameBytes = 64;

// The zone named `name`: an IANA zone or link ("UTC", "US/Eastern"), case as the database
// spells it. kInvalidArgument (wire::UnknownTimeZone) for any other name, for one longer than
// kMaxTimeZoneNameBytes, and for "localtime" (the server's own zone, not a name a client can
// mean).
OpResult<const date::time_zone*> FindTimeZone(std::string_view name);

}  // namespace anteroom
