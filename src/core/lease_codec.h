#pragma once
// The text of a queue lease, written and read in one place for every backend:
//
//   <id> "." <delivery> "." <tag>
//
// id and delivery in decimal; tag = base64url (no padding) of the first kLeaseTagBytes of the
// LeaseMac of  queue "/" id "." delivery  (16 characters). The tag binds a lease to its queue,
// job and delivery, so workers cannot forge or move leases; it is compared in constant time.
// Changing this format breaks the leases workers hold across an upgrade.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/lease_mac.h"
#include "core/queue_types.h"

namespace anteroom::core {

// A lease with a genuine tag: the job and the delivery it names. The log records these rather
// than lease strings, so replaying it needs no key and costs no MAC.
struct LeaseRef {
  JobId id = 0;
  uint64_t delivery = 0;
};

inline constexpr size_t kLeaseTagBytes = 12;

// The lease of a delivery. The tag is empty on an OpenSSL failure (the lease then matches
// nothing when it comes back).
std::string EncodeLease(LeaseMac& mac, std::string_view queue, JobId id, uint64_t delivery);

// The job and delivery a lease of `queue` names, or nullopt when it is not lease text or its
// tag is not the one EncodeLease makes (forged, damaged, or of another queue).
std::optional<LeaseRef> DecodeLease(LeaseMac& mac, std::string_view queue, std::string_view lease);

}  // namespace anteroom::core
