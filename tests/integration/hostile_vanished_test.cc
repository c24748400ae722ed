// A live client that vanishes without a word (its network gone: no FIN, no RST) must stop
// counting as present within the room's check-in timeout, not when TCP gives up some 15 minutes
// later: otherwise it holds its place or its slot, the one thing a waiting room forbids.
//
// Each test runs in a network namespace of its own (unshare, as root), with the server and its
// clients on that namespace's 127.0.0.1; nftables then drops every packet of the vanished
// client's connection, so the server sees real retransmits and silence.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "support/api_checks.h"
#include "support/live_client.h"
#include "support/redis_process.h"
#include "support/server_fixture.h"

namespace anteroom::testing {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;
using Kind = LiveClient::Kind;

constexpr int64_t kCheckinMs = 3000;
constexpr int64_t kGraceMs = 2000;
// The stream ends within the check-in timeout of the client's last acknowledgement
// (LiveStream::BoundSilence); what follows is the room's own rule (grace, or the drop-out
// clock), and a tick of the hub. The margin is for a loaded machine.
constexpr milliseconds kMargin(1500);
// Before the bound, a vanished client kept its slot for 50 s and more: give up well before.
constexpr milliseconds kGiveUp(20'000);

class HostileVanishedTest : public ServerTest, public ::testing::WithParamInterface<Kind> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for a network namespace of its own";
    own_net_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(own_net_, 0) << std::strerror(errno);
    // Only this thread moves; the server, spawned from it, is born in the new namespace.
    ASSERT_EQ(unshare(CLONE_NEWNET), 0) << "unshare(CLONE_NEWNET): " << std::strerror(errno);
    Must({"/usr/sbin/ip", "link", "set", "lo", "up"});
    Must({"/usr/sbin/nft", "add", "table", "inet", "vanish"});
    Must({"/usr/sbin/nft", "add", "chain", "inet", "vanish", "out",
          "{ type filter hook output priority 0 ; }"});
    ServerTest::SetUp();
  }

  void TearDown() override {
    ServerTest::TearDown();
    if (own_net_ >= 0) {
      EXPECT_EQ(setns(own_net_, CLONE_NEWNET), 0) << std::strerror(errno);
      close(own_net_);
    }
  }

  void Must(const std::vector<std::string>& argv) {
    ProgramResult r = RunProgram(argv, std::chrono::seconds(10));
    ASSERT_EQ(r.exit_code, 0) << argv[0] << " failed (scripts/setup.sh installs iproute2 and "
                              << "nftables): " << r.out;
  }

  // From now on every packet to or from `port` on loopback is lost, both ways.
  void Vanish(uint16_t port) {
    ASSERT_NE(port, 0);
    for (const char* dir : {"sport", "dport"}) {
      Must({"/usr/sbin/nft", "add", "rule", "inet", "vanish", "out", "tcp", dir,
            std::to_string(port), "drop"});
    }
  }

  std::unique_ptr<LiveClient> Open(const std::string& session) {
    std::string target = "/v1/rooms/r/" +
                         std::string(GetParam() == Kind::kWebSocket ? "ws" : "events") +
                         "?session=" + session;
    auto c = std::make_unique<LiveClient>(server().port(), target, GetParam());
    EXPECT_TRUE(c->ok()) << c->error() << " " << c->refused_body();
    return c;
  }

  void MakeRoom() {
    MustPut("r", {{"capacity", 1},
                  {"grace_ms", kGraceMs},
                  {"checkin_timeout_ms", kCheckinMs},
                  {"idle_timeout_ms", kCheckinMs}});
  }

  // Checks `session` in every 200 ms until `done` is true of its answer; the time it took, or
  // nullopt after kGiveUp. Whoever else must stay present is checked in on the same beat.
  template <typename Done>
  std::optional<milliseconds> CheckInUntil(const std::string& session, Done done,
                                           const std::vector<std::string>& also = {}) {
    auto start = SteadyClock::now();
    while (SteadyClock::now() - start < kGiveUp) {
      for (const auto& other : also) client().Check("r", other);
      HttpResult r = client().Check("r", session);
      if (done(r)) {
        return std::chrono::duration_cast<milliseconds>(SteadyClock::now() - start);
      }
      std::this_thread::sleep_for(milliseconds(200));
    }
    return std::nullopt;
  }

  int own_net_ = -1;
};

TEST_P(HostileVanishedTest, AnAdmittedClientThatVanishesLosesItsSlotAfterGrace) {
  MakeRoom();
  auto a = Open("a");
  ASSERT_TRUE(a->NextStatus([](const auto& j) { return StrField(j, "status") == "active"; },
                            milliseconds(3000)));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));
  // The control: while A's network works, its stream keeps the slot past the check-in timeout.
  std::this_thread::sleep_for(milliseconds(kCheckinMs + 500));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));
  ASSERT_TRUE(a->NextOf("heartbeat", milliseconds(3000))) << "the stream is live";

  Vanish(a->local_port());
  auto took = CheckInUntil("b", [](const HttpResult& r) { return IsSession(r, "active"); });
  ASSERT_TRUE(took) << "B was still waiting " << kGiveUp.count()
                    << " ms after A vanished: A's stream kept its slot";
  EXPECT_LT(*took, milliseconds(kCheckinMs + kGraceMs) + kMargin);
  std::printf(
      "[ note     ] %s: B admitted %lld ms after the admitted A vanished "
      "(check-in timeout %lld ms + grace %lld ms)\n",
      GetParam() == Kind::kWebSocket ? "WebSocket" : "SSE", static_cast<long long>(took->count()),
      static_cast<long long>(kCheckinMs), static_cast<long long>(kGraceMs));
}

TEST_P(HostileVanishedTest, AWaitingClientThatVanishesLosesItsPlace) {
  MakeRoom();
  ASSERT_TRUE(IsSession(client().Check("r", "holder"), "active"));
  auto a = Open("a");
  ASSERT_TRUE(a->NextStatus([](const auto& j) { return StrField(j, "status") == "waiting"; },
                            milliseconds(3000)));
  HttpResult b = client().Check("r", "b");
  ASSERT_TRUE(IsSession(b, "waiting"));
  ASSERT_EQ(IntField(b.json, "position"), 2) << b.body;

  Vanish(a->local_port());
  auto took = CheckInUntil(
      "b", [](const HttpResult& r) { return IntField(r.json, "position") == 1; }, {"holder"});
  ASSERT_TRUE(took) << "B was still behind A " << kGiveUp.count()
                    << " ms after A vanished: A's stream held its place";
  // The stream ends within the check-in timeout; the drop-out clock then runs one more.
  EXPECT_LT(*took, milliseconds(2 * kCheckinMs) + kMargin);
  std::printf(
      "[ note     ] %s: B moved up %lld ms after the waiting A vanished "
      "(check-in timeout %lld ms)\n",
      GetParam() == Kind::kWebSocket ? "WebSocket" : "SSE", static_cast<long long>(took->count()),
      static_cast<long long>(kCheckinMs));
}

INSTANTIATE_TEST_SUITE_P(Transports, HostileVanishedTest,
                         ::testing::Values(Kind::kWebSocket, Kind::kEvents), [](const auto& info) {
                           return info.param == Kind::kWebSocket ? "WebSocket" : "Events";
                         });

}  // namespace
}  // namespace anteroom::testing
