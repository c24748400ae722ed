#include "core/id_hash.h"

#include <random>

namespace anteroom::core {

uint64_t IdHashSeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace anteroom::core
