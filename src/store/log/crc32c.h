#pragma once
// CRC-32C (Castagnoli), the checksum of ext4, iSCSI and RocksDB: the SSE4.2 crc32 instruction
// where the CPU has it (about 8 bytes per cycle), Boost.CRC's table otherwise.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace anteroom::store::log {

// Extends `crc` (0 to start) over `data`.
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);
// The table-driven path alone (what Crc32c uses without SSE4.2), for tests.
uint32_t Crc32cPortable(std::string_view data, uint32_t crc = 0);

}  // namespace anteroom::store::log
