// Many clients at once against one room of a real server: every answer is 200, capacity is
// never exceeded, nobody is lost, and the line stays exact.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/api_checks.h"
#include "support/server_fixture.h"

namespace anteroom::testing {
namespace {

using ConcurrencyHttpTest = ServerTest;

constexpr int kThreads = 32;

TEST_F(ConcurrencyHttpTest, ConcurrentChecksKeepTheRules) {
  constexpr int kCapacity = 8;
  constexpr int kSessionsPerThread = 20;
  constexpr int kRounds = 3;  // each session checks this many times
  MustPut("r", {{"capacity", kCapacity}});

  std::atomic<int> non_200{0};
  std::atomic<int> over_capacity{0};
  std::atomic<int> bad_status{0};
  std::mutex mu;
  std::set<std::string> ever_active;  // guarded by mu
  std::string first_problem;          // guarded by mu
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Client client(server().url());
      for (int round = 0; round < kRounds; ++round) {
        for (int i = 0; i < kSessionsPerThread; ++i) {
          std::string session = "t" + std::to_string(t) + "-" + std::to_string(i);
          HttpResult r = client.Check("r", session);
          if (r.status != 200) {
            ++non_200;
            std::lock_guard lock(mu);
            if (first_problem.empty()) first_problem = r.body + r.error;
            continue;
          }
          auto active = IntField(r.json, "active");
          if (!active || *active > kCapacity) ++over_capacity;
          auto status = StrField(r.json, "status");
          if (status == "active") {
            std::lock_guard lock(mu);
            ever_active.insert(session);
          } else if (status != "waiting") {
            ++bad_status;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(non_200.load(), 0) << first_problem;
  EXPECT_EQ(over_capacity.load(), 0);
  EXPECT_EQ(bad_status.load(), 0);
  EXPECT_EQ(ever_active.size(), static_cast<size_t>(kCapacity)) << "nobody left, so no one else";

  constexpr int kTotal = kThreads * kSessionsPerThread;
  HttpResult room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "active"), kCapacity) << room.body;
  EXPECT_EQ(IntField(room.json, "waiting"), kTotal - kCapacity) << room.body;
  EXPECT_EQ(IntField(room.json, "admitted_total"), kCapacity) << room.body;

  // Positions are exact: the waiting sessions hold 1..N-capacity, each once.
  std::set<int64_t> positions;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kSessionsPerThread; ++i) {
      std::string session = "t" + std::to_string(t) + "-" + std::to_string(i);
      HttpResult r = client().Check("r", session);
      ASSERT_EQ(r.status, 200) << r.body;
      if (ever_active.count(session) != 0) {
        EXPECT_EQ(StrField(r.json, "status"), "active") << session;
      } else {
        auto position = IntField(r.json, "position");
        ASSERT_TRUE(position.has_value()) << r.body;
        positions.insert(*position);
      }
    }
  }
  ASSERT_EQ(positions.size(), static_cast<size_t>(kTotal - kCapacity));
  EXPECT_EQ(*positions.begin(), 1);
  EXPECT_EQ(*positions.rbegin(), kTotal - kCapacity);
}

TEST_F(ConcurrencyHttpTest, ConcurrentChecksAndLeavesNeverExceedCapacity) {
  constexpr int kCapacity = 4;
  constexpr int kOps = 60;
  MustPut("r", {{"capacity", kCapacity}});

  std::atomic<int> failures{0};
  std::atomic<int> over_capacity{0};
  std::mutex mu;
  std::string first_problem;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Client client(server().url());
      std::string session = "s" + std::to_string(t);
      for (int i = 0; i < kOps; ++i) {
        HttpResult r;
        switch ((i + t) % 5) {
          case 0:
          case 1:
          case 2:
            r = client.Check("r", session);
            break;
          case 3:
            r = client.Leave("r", session, /*final=*/(i % 2) == 0);
            break;
          case 4:
            r = client.Touch("r", session);
            break;
        }
        bool unknown = r.status == 404 && ErrorCode(r) == "unknown_session";
        if (r.status != 200 && !unknown) {
          ++failures;
          std::lock_guard lock(mu);
          if (first_problem.empty()) first_problem = r.body + r.error;
          continue;
        }
        if (r.status == 200) {
          auto active = IntField(r.json, "active");
          if (!active || *active > kCapacity) ++over_capacity;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << first_problem;
  EXPECT_EQ(over_capacity.load(), 0);

  HttpResult room = client().GetRoom("r");
  auto active = IntField(room.json, "active");
  auto waiting = IntField(room.json, "waiting");
  ASSERT_TRUE(active && waiting) << room.body;
  EXPECT_LE(*active, kCapacity);
  if (*waiting > 0) {
    EXPECT_EQ(*active, kCapacity) << "work-conserving: " << room.body;
  }
  EXPECT_EQ(client().Health().status, 200);
}

TEST_F(ConcurrencyHttpTest, ManyRoomsInParallel) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Client client(server().url());
      std::string room = "room" + std::to_string(t);
      if (client.PutRoom(room, {{"capacity", 2}}).status != 200) ++failures;
      for (int i = 0; i < 5; ++i) {
        HttpResult r = client.Check(room, "s" + std::to_string(i));
        bool want_active = i < 2;
        if (r.status != 200 || (StrField(r.json, "status") == "active") != want_active) ++failures;
      }
      HttpResult get = client.GetRoom(room);
      if (IntField(get.json, "active") != 2 || IntField(get.json, "waiting") != 3) ++failures;
      if (t % 2 == 0 && client.DeleteRoom(room).status != 200) ++failures;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  HttpResult list = client().ListRooms();
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.json.at("rooms").as_array().size(), static_cast<size_t>(kThreads / 2));
}

}  // namespace
}  // namespace anteroom::testing
