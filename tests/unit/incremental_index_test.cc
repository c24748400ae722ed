// core::IncrementalIndex: the same answers as a plain set through many growths (erasing the
// element a move is at included), no operation moving more than its bound, the new table never
// growing during a move, and the same buckets as one boost flat set once a move is over.
#include "core/incremental_index.h"

#include <gtest/gtest.h>

#include <boost/unordered/unordered_flat_set.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace anteroom::core {
namespace {

// Elements are indices into `ids`, looked up by id, as the room's sessions are in its slab.
struct Hash {
  using is_transparent = void;
  const std::vector<std::string>* ids;
  size_t operator()(uint32_t i) const { return (*this)(std::string_view((*ids)[i])); }
  size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
};
struct Eq {
  using is_transparent = void;
  const std::vector<std::string>* ids;
  bool operator()(uint32_t a, uint32_t b) const { return a == b; }
  bool operator()(std::string_view id, uint32_t i) const { return (*ids)[i] == id; }
  bool operator()(uint32_t i, std::string_view id) const { return (*ids)[i] == id; }
};

template <size_t kStep>
using Index = IncrementalIndex<Hash, Eq, kStep>;

// Every operation moves at most the bound, and the table that takes inserts never grows while
// a move is on (it would be boost's whole-table rehash: the pause this index exists to avoid).
template <typename I>
class Bounds {
 public:
  explicit Bounds(const I& index) : index_(index) { Note(); }
  // After each operation.
  void Check(const char* what) {
    EXPECT_LE(index_.moved() - moved_, I::kMaxMovesPerOp) << what;
    if (moving_ && index_.moving()) {
      EXPECT_EQ(index_.bucket_count(), buckets_) << what << ": a table grew during a move";
    }
    if (!moving_ && index_.moving()) ++moves_started_;
    Note();
  }
  int moves_started() const { return moves_started_; }

 private:
  void Note() {
    moved_ = index_.moved();
    moving_ = index_.moving();
    buckets_ = index_.bucket_count();
  }
  const I& index_;
  uint64_t moved_ = 0;
  bool moving_ = false;
  size_t buckets_ = 0;
  int moves_started_ = 0;
};

template <typename I>
void ExpectSameElements(const I& index, const std::unordered_map<std::string, uint32_t>& model,
                        const std::vector<std::string>& ids) {
  ASSERT_EQ(index.size(), model.size());
  std::vector<int> seen(ids.size(), 0);
  size_t visits = 0;
  index.ForEach([&](uint32_t i) {
    ++visits;
    if (i < seen.size()) ++seen[i];
  });
  ASSERT_EQ(visits, model.size());
  for (const auto& [id, i] : model) {
    ASSERT_EQ(seen[i], 1) << "element " << i << " visited " << seen[i] << " times";
  }
}

// Random inserts, erases (by index and by id, and of the element the move is at), finds and
// duplicate inserts against std::unordered_map, through growths, shrinks and growths again;
// the whole content compared at every move's start and end and now and then.
template <size_t kStep>
void RandomAgainstModel(uint64_t seed) {
  std::vector<std::string> ids;
  std::vector<uint32_t> free;
  Index<kStep> index(Hash{&ids}, Eq{&ids});
  std::unordered_map<std::string, uint32_t> model;
  std::vector<uint32_t> live;  // the model's indices, for picking one at random
  std::unordered_map<uint32_t, size_t> where;
  std::mt19937_64 rng(seed);
  Bounds bounds(index);
  uint64_t next_id = 0;
  int drain_erases = 0;

  auto forget = [&](uint32_t i) {
    model.erase(ids[i]);
    size_t at = where[i];
    where[live.back()] = at;
    live[at] = live.back();
    live.pop_back();
    where.erase(i);
    ids[i].clear();  // as the room clears a freed session's id, after the erase
    free.push_back(i);
  };

  // Phases: grow to 60k, shrink to 5k, grow to 120k, shrink to 0.
  const std::vector<size_t> targets = {60'000, 5'000, 120'000, 0};
  for (size_t target : targets) {
    bool growing = target > model.size();
    for (int op = 0; growing ? model.size() < target : model.size() > target; ++op) {
      bool was_moving = index.moving();
      uint64_t r = rng() % 100;
      if (growing ? r < 70 : r < 25) {  // insert a new id
        uint32_t i;
        if (!free.empty() && rng() % 2 == 0) {
          i = free.back();
          free.pop_back();
        } else {
          i = static_cast<uint32_t>(ids.size());
          ids.emplace_back();
        }
        ids[i] = "session-" + std::to_string(next_id++);
        ASSERT_TRUE(index.insert(i));
        where[i] = live.size();
        live.push_back(i);
        model.emplace(ids[i], i);
        bounds.Check("insert");
      } else if (r < 80 && !live.empty()) {  // erase one at random, by index or by id
        uint32_t i = live[rng() % live.size()];
        bool by_id = rng() % 2 == 0;
        ASSERT_TRUE(by_id ? index.erase(std::string_view(ids[i])) : index.erase(i));
        forget(i);
        bounds.Check("erase");
      } else if (r < 88 && index.moving()) {  // erase the element the move is at
        uint32_t i = *index.next_to_move();
        ASSERT_EQ(model.at(ids[i]), i);
        ASSERT_TRUE(index.erase(i));
        forget(i);
        ++drain_erases;
        bounds.Check("erase at the drain");
      } else if (r < 94 && !live.empty()) {  // a duplicate insert changes nothing
        uint32_t i = live[rng() % live.size()];
        ASSERT_FALSE(index.insert(i));
        bounds.Check("duplicate insert");
      } else {  // finds: a live id and an id never used
        if (!live.empty()) {
          uint32_t i = live[rng() % live.size()];
          ASSERT_EQ(index.find(std::string_view(ids[i])), std::optional<uint32_t>(i));
        }
        std::string absent = "absent-" + std::to_string(rng());
        ASSERT_FALSE(index.find(std::string_view(absent)).has_value());
        ASSERT_FALSE(index.erase(std::string_view(absent)));
        bounds.Check("find");
      }
      ASSERT_EQ(index.size(), model.size());
      if (was_moving != index.moving() || op % 4999 == 0) {
        ExpectSameElements(index, model, ids);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
    ExpectSameElements(index, model, ids);
  }
  EXPECT_TRUE(index.empty());
  EXPECT_FALSE(index.moving());
  EXPECT_GE(bounds.moves_started(), 8) << "growths tested";
  EXPECT_GE(drain_erases, 300) << "erases at the drain position tested";
}

TEST(IncrementalIndexTest, AnswersAsASetThroughGrowthsSmallStep) { RandomAgainstModel<4>(1); }

TEST(IncrementalIndexTest, AnswersAsASetThroughGrowthsDefaultStep) { RandomAgainstModel<32>(2); }

// 1M inserts in a row, as arrivals at a drop: no insert moves more than the bound, every
// growth is spread, and whenever no move is on the index has exactly the buckets of one
// boost flat set given the same inserts (the memory accounting and the heap per session stay
// as they were).
TEST(IncrementalIndexTest, NoInsertMovesMoreThanTheBound) {
  constexpr uint32_t kN = 1'000'000;
  std::vector<std::string> ids;
  ids.reserve(kN);
  Index<32> index(Hash{&ids}, Eq{&ids});
  boost::unordered_flat_set<uint32_t, Hash, Eq> plain(0, Hash{&ids}, Eq{&ids});
  Bounds bounds(index);
  int compared = 0;
  for (uint32_t i = 0; i < kN; ++i) {
    ids.push_back(std::to_string(i * 2654435761u));
    ASSERT_TRUE(index.insert(i));
    plain.insert(i);
    bounds.Check("insert");
    if (!index.moving()) {  // from the first insert (14 slots) on
      EXPECT_EQ(index.bucket_count(), plain.bucket_count()) << "at " << i + 1;
      ++compared;
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_EQ(index.size(), kN);
  // 14 -> 2M slots is 17 doublings; those from 14 and 29 end within their insert.
  EXPECT_EQ(bounds.moves_started(), 15);
  EXPECT_GT(compared, static_cast<int>(kN * 9 / 10));
  for (uint32_t i = 0; i < kN; i += 997) {
    EXPECT_EQ(index.find(std::string_view(ids[i])), std::optional<uint32_t>(i));
  }
}

// Erases alone end a move: erasing the element at the drain again and again, and then the
// rest, leaves an empty index with no old table.
TEST(IncrementalIndexTest, ErasesAloneEndAMove) {
  std::vector<std::string> ids;
  Index<4> index(Hash{&ids}, Eq{&ids});
  std::unordered_map<std::string, uint32_t> model;
  uint32_t n = 0;
  while (n < 1000 || !index.moving()) {
    ids.push_back("b" + std::to_string(n));
    model.emplace(ids.back(), n);
    ASSERT_TRUE(index.insert(n++));
  }
  Bounds bounds(index);
  while (index.moving()) {
    uint32_t i = *index.next_to_move();
    ASSERT_TRUE(index.erase(std::string_view(ids[i])));
    model.erase(ids[i]);
    bounds.Check("erase at the drain");
    ExpectSameElements(index, model, ids);
    if (::testing::Test::HasFatalFailure()) return;
  }
  for (uint32_t i = 0; i < n; ++i) {
    EXPECT_EQ(index.erase(i), model.erase(ids[i]) == 1);
  }
  EXPECT_TRUE(index.empty());
  index.ForEach([](uint32_t i) { ADD_FAILURE() << "element " << i << " left"; });
}

// reserve() finishes a move at once and makes room: the inserts it made room for move nothing.
TEST(IncrementalIndexTest, ReserveFinishesAMoveAndMakesRoom) {
  std::vector<std::string> ids;
  Index<8> index(Hash{&ids}, Eq{&ids});
  uint32_t n = 0;
  while (!index.moving()) {
    ids.push_back("a" + std::to_string(n));
    ASSERT_TRUE(index.insert(n++));
  }
  index.reserve(100'000);
  EXPECT_FALSE(index.moving());
  EXPECT_EQ(index.size(), n);
  uint64_t moved = index.moved();
  while (n < 100'000) {
    ids.push_back("a" + std::to_string(n));
    ASSERT_TRUE(index.insert(n++));
  }
  EXPECT_EQ(index.moved(), moved);
  EXPECT_FALSE(index.moving());
  for (uint32_t i = 0; i < n; i += 101) EXPECT_TRUE(index.contains(std::string_view(ids[i])));
}

}  // namespace
}  // namespace anteroom::core
