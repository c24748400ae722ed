#include "common/time_zones.h"

#include <algorithm>
#include <exception>
#include <string>

#include "common/wire_errors.h"

namespace anteroom {

namespace {

// The bytes of IANA names: letters, digits, and `/ _ + -` ("America/Port-au-Prince",
// "Etc/GMT+5"). Anything else (dots, spaces) is refused before the database is asked.
bool NameBytes(std::string_view name) {
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '/' ||
           c == '_' || c == '+' || c == '-';
  });
}

}  // namespace

OpResult<const date::time_zone*> FindTimeZone(std::string_view name) {
  if (name.empty() || name.size() > kMaxTimeZoneNameBytes || !NameBytes(name) ||
      name == "localtime") {
    return {OpStatus::kInvalidArgument, wire::UnknownTimeZone(name)};
  }
  try {
    return date::locate_zone(name);
  } catch (const std::exception&) {
    // locate_zone throws std::runtime_error for a name it does not hold, and the same when the
    // database cannot be read at all: either way no zone of that name can be used.
    return {OpStatus::kInvalidArgument, wire::UnknownTimeZone(name)};
  }
}

}  // namespace anteroom
