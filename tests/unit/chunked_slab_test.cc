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

// A slab cut back gives its chunks back, but one spare past the end, so a size going back and
// forth across a chunk's edge does not allocate each time; what is kept keeps its place.
TEST(ChunkedSlabTest, TruncateGivesBackTheChunksPastTheEndButOne) {
  ChunkedSlab<size_t, 10, 4> slab;
  for (size_t i = 0; i < 5000; ++i) slab.emplace_back() = i;
  const size_t* kept = &slab[20];
  slab.Truncate(40);  // records in chunks 0-2 (16 + 16 + 32): one spare (64) is kept
  EXPECT_EQ(slab.size(), 40u);
  EXPECT_EQ(slab.capacity(), 16u + 16 + 32 + 64);
  EXPECT_EQ(&slab[20], kept);
  EXPECT_EQ(slab[39], 39u);
  size_t capacity = slab.capacity();
  for (int k = 0; k < 10; ++k) {  // back and forth across the edge at 64
    while (slab.size() < 70) slab.emplace_back();
    slab.Truncate(60);
    EXPECT_EQ(slab.capacity(), capacity) << "no chunk made and freed at the edge";
  }
  slab.Truncate(0);
  EXPECT_EQ(slab.capacity(), 16u) << "an empty slab keeps one small chunk";
  slab.emplace_back() = 7;
  EXPECT_EQ(slab[0], 7u);
}

}  // namespace
}  // namespace anteroom::core
