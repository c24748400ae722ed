// DrainList: every live member is told once, members added after the drain are told at once,
// and members that ended are neither kept alive nor told.
#include "http/drain_list.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace anteroom::http {
namespace {

struct Counted : Drainable {
  void BeginDrain() override { ++told; }
  int told = 0;
};

TEST(DrainListTest, TellsEveryLiveMemberOnceAndLateOnesAtOnce) {
  DrainList list;
  auto a = std::make_shared<Counted>();
  auto b = std::make_shared<Counted>();
  list.Add(a);
  list.Add(b);
  EXPECT_FALSE(list.draining());
  EXPECT_EQ(a->told, 0);
  list.Drain();
  list.Drain();  // once
  EXPECT_TRUE(list.draining());
  EXPECT_EQ(a->told, 1);
  EXPECT_EQ(b->told, 1);
  auto late = std::make_shared<Counted>();
  list.Add(late);
  EXPECT_EQ(late->told, 1);
}

TEST(DrainListTest, HoldsMembersWeaklyAndForgetsThoseThatEnded) {
  DrainList list;
  std::weak_ptr<Counted> gone;
  {
    auto member = std::make_shared<Counted>();
    gone = member;
    list.Add(member);
  }
  EXPECT_TRUE(gone.expired());  // the list kept nothing alive
  // Many short-lived members: the list is swept as it grows, and the live ones are all told.
  std::vector<std::shared_ptr<Counted>> kept;
  for (int i = 0; i < 10'000; ++i) {
    auto m = std::make_shared<Counted>();
    list.Add(m);
    if (i % 100 == 0) kept.push_back(m);
  }
  list.Drain();
  for (auto& m : kept) EXPECT_EQ(m->told, 1);
}

}  // namespace
}  // namespace anteroom::http
