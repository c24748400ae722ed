#include "core/line.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <vector>

namespace anteroom::core {
namespace {

// ForEach is the live channel's one ordered sweep: everyone in line order, nothing else.
TEST(LineTest, ForEachVisitsTheLineInOrderAcrossHolesAndCompaction) {
  std::vector<Line::Ticket> tickets(5'000);
  Line line([&](Line::Member m, Line::Ticket t) { tickets[m] = t; });
  std::vector<uint32_t> want;
  auto visited = [&] {
    std::vector<uint32_t> got;
    line.ForEach([&](Line::Member m) {
      got.push_back(m);
      EXPECT_EQ(line.Position(tickets[m]), static_cast<int64_t>(got.size()));
    });
    return got;
  };
  EXPECT_TRUE(visited().empty());
  for (uint32_t m = 0; m < 5'000; ++m) {
    tickets[m] = line.PushBack(m);
    want.push_back(m);
    if (m % 3 == 0) {  // holes, and a head that moves
      line.Remove(tickets[want.front()]);
      want.erase(want.begin());
    }
  }
  EXPECT_EQ(visited(), want);
  for (size_t i = want.size(); i-- > 0;) {
    if (i % 7 == 0) {
      line.Remove(tickets[want[i]]);
      want.erase(want.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  EXPECT_EQ(visited(), want);
}

TEST(LineTest, PositionsAreExactAfterRemovalsAndCompaction) {
  std::vector<Line::Ticket> tickets(10'000);
  Line line([&](Line::Member m, Line::Ticket t) { tickets[m] = t; });
  for (uint32_t m = 0; m < 10'000; ++m) tickets[m] = line.PushBack(m);
  // Remove every odd member; then the even ones keep their order.
  for (uint32_t m = 1; m < 10'000; m += 2) line.Remove(tickets[m]);
  for (uint32_t m = 0; m < 10'000; m += 2) EXPECT_EQ(line.Position(tickets[m]), m / 2 + 1);
  EXPECT_EQ(line.Front(), 0u);
  // Churn past the end of the array forces compaction; positions stay exact.
  std::vector<uint32_t> order;
  for (uint32_t m = 0; m < 10'000; m += 2) order.push_back(m);
  tickets.resize(40'000);
  for (uint32_t m = 10'000; m < 40'000; ++m) {
    tickets[m] = line.PushBack(m);
    order.push_back(m);
    line.Remove(tickets[order.front()]);
    order.erase(order.begin());
  }
  for (size_t i = 0; i < order.size(); i += 997) {
    EXPECT_EQ(line.Position(tickets[order[i]]), static_cast<int64_t>(i + 1));
  }
  EXPECT_EQ(line.size(), order.size());
  EXPECT_EQ(line.Front(), order.front());
}

// PushFront and At against a deque: random pushes at both ends and removals anywhere, with
// every position and every At checked after each step (the line stays exact across the
// compactions that make room in front).
TEST(LineTest, PushFrontAndAtMatchADeque) {
  constexpr uint32_t kMembers = 3'000;
  std::vector<Line::Ticket> tickets(kMembers);
  Line line([&](Line::Member m, Line::Ticket t) { tickets[m] = t; });
  std::deque<uint32_t> model;
  std::mt19937 rng(42);
  for (uint32_t m = 0; m < kMembers; ++m) {
    switch (rng() % 4) {
      case 0:
        tickets[m] = line.PushFront(m);
        model.push_front(m);
        break;
      case 1:
        if (!model.empty()) {
          size_t k = rng() % model.size();
          line.Remove(tickets[model[k]]);
          model.erase(model.begin() + static_cast<std::ptrdiff_t>(k));
        }
        [[fallthrough]];
      default:
        tickets[m] = line.PushBack(m);
        model.push_back(m);
    }
    ASSERT_EQ(line.size(), model.size());
    if (m % 97 == 0 || m + 1 == kMembers) {
      for (size_t k = 0; k < model.size(); ++k) {
        ASSERT_EQ(line.At(static_cast<int64_t>(k) + 1), model[k]) << k;
        ASSERT_EQ(line.Position(tickets[model[k]]), static_cast<int64_t>(k) + 1);
      }
      ASSERT_EQ(line.Front(), model.front());
    }
  }
}

// Append (a draw publishing its places) is PushBack of each in order, whatever the tail's
// place in its block, holes, a front gap, Reserve and the compactions between.
TEST(LineTest, AppendAndReserveMatchPushBack) {
  constexpr uint32_t kMembers = 20'000;
  std::vector<Line::Ticket> tickets(kMembers);
  Line line([&](Line::Member m, Line::Ticket t) { tickets[m] = t; });
  std::deque<uint32_t> model;
  std::mt19937 rng(7);
  uint32_t next = 0;
  while (next < kMembers) {
    switch (rng() % 5) {
      case 0: {  // a batch of up to 300 (often across blocks)
        std::vector<Line::Member> batch;
        for (uint32_t k = rng() % 300; k > 0 && next < kMembers; --k) batch.push_back(next++);
        Line::Ticket first = line.Append(batch);
        for (size_t k = 0; k < batch.size(); ++k) {
          tickets[batch[k]] = first + static_cast<Line::Ticket>(k);
          model.push_back(batch[k]);
        }
        break;
      }
      case 1:
        line.Reserve(rng() % 2'000);
        break;
      case 2:
        for (int k = 0; k < 40 && !model.empty(); ++k) {
          size_t at = rng() % model.size();
          line.Remove(tickets[model[at]]);
          model.erase(model.begin() + static_cast<std::ptrdiff_t>(at));
        }
        break;
      case 3:
        tickets[next] = line.PushFront(next);
        model.push_front(next++);
        break;
      default:
        tickets[next] = line.PushBack(next);
        model.push_back(next++);
    }
    ASSERT_EQ(line.size(), model.size());
    for (size_t k = 0; k < model.size(); k += 1 + model.size() / 50) {
      ASSERT_EQ(line.At(static_cast<int64_t>(k) + 1), model[k]) << k;
      ASSERT_EQ(line.Position(tickets[model[k]]), static_cast<int64_t>(k) + 1) << k;
    }
  }
  std::vector<uint32_t> seen;
  line.ForEach([&](Line::Member m) { seen.push_back(m); });
  ASSERT_EQ(seen, std::vector<uint32_t>(model.begin(), model.end()));
}

}  // namespace
}  // namespace anteroom::core
