// core::ChunkedSlab: every index lands in its own record, records never move, and a slab of a
// few records costs a few records, not a whole chunk.
#include "core/chunked_slab.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace anteroom::core {
namespace {

TEST(ChunkedSlabTest, SmallSlabsAreSmallAndGrowByDoublingUpToAChunk) {
  ChunkedSlab<int, 10, 4> slab;
  EXPECT_EQ(slab.capacity(), 0u);
  slab.emplace_back();
  EXPECT_EQ(slab.capacity(), 16u) << "one record: the first small chunk";
  std::vector<size_t> capacities;
  for (size_t i = 1; i < 3000; ++i) {
    size_t before = slab.capacity();
    slab.emplace_back();
    if (slab.capacity() != before) capacities.push_back(slab.capacity());
  }
  EXPECT_EQ(capacities, (std::vector<size_t>{32, 64, 128, 256, 512, 1024, 2048, 3072}));
  EXPECT_LE(slab.capacity() - slab.size(), ChunkedSlab<int>::kChunk) << "slack at most a chunk";
}

TEST(ChunkedSlabTest, EveryIndexIsItsOwnRecordAndNoneMoves) {
  ChunkedSlab<size_t, 6, 2> slab;  // small chunks: many of each kind
  std::vector<const size_t*> where;
  for (size_t i = 0; i < 1000; ++i) {
    slab.emplace_back() = i * 7 + 1;
    where.push_back(&slab[i]);
  }
  for (size_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(slab[i], i * 7 + 1) << i;
    EXPECT_EQ(&slab[i], where[i]) << "record " << i << " moved";
  }
  const ChunkedSlab<size_t, 6, 2>& view = slab;
  EXPECT_EQ(view[999], 999u * 7 + 1);
  ChunkedSlab<int> filled;
  filled.resize(1500);
  EXPECT_EQ(filled.size(), 1500u);
  EXPECT_EQ(filled[1499], 0);
}

}  // namespace
}  // namespace anteroom::core
