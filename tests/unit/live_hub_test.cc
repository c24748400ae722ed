// The live hub against the backend's own answers, without sockets: streams that record what they
// are sent, a fake clock, tiny chunks (3 messages) so that every round runs in many chunks with
// the line read again between them. Random joins, departures, evictions, capacity changes and
// hang-ups; after each batch, once the hub has settled, every open stream's last message must be
// exactly what the backend says of its session (Present: a check-in that never joins).
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/clock.h"
#include "core/token.h"
#include "http/live_stream.h"
#include "server/live_hub.h"
#include "server/session_json.h"
#include "store/memory/memory_backend.h"

namespace anteroom::server {
namespace {

namespace net = boost::asio;
namespace json = boost::json;
using core::SessionStatus;
using core::SessionView;
using http::kMinSilenceBound;
using http::LiveStreamOptions;
using http::Socket;

// A live stream whose messages are written at once and kept.
class RecordingStream final : public LiveStream {
 public:
  explicit RecordingStream(net::io_context& ioc)
      : LiveStream(LiveStreamOptions{}, ioc.get_executor()),
        ioc_(ioc),
        socket_(ioc.get_executor()) {}
  Executor executor() override { return ioc_.get_executor(); }
  using LiveStream::heartbeat_interval;
  size_t BufferBytes() const override { return 0; }
  void HangUp() { Ended(); }  // the client goes away

  std::vector<json::value> messages;
  bool closed = false;

 protected:
  void WriteMessage(const std::string& message) override {
    messages.push_back(json::parse(message));
    Written(true);
  }
  void CloseTransport(bool) override { closed = true; }
  Socket& TcpSocket() override { return socket_; }  // never opened: socket options do nothing

 private:
  net::io_context& ioc_;
  Socket socket_;
};

class LiveHubTest : public ::testing::Test {
 protected:
  LiveHubTest()
      : backend_(clock_, store::MemoryBackendOptions{.run_timer = false}),
        signer_("live-hub-test", 600'000),
        hub_(backend_, signer_, clock_, ioc_,
             LiveHubOptions{.tick_ms = 10, .present_batch = 4, .chunk = 3}) {
    hub_.Start();
  }
  ~LiveHubTest() override {
    hub_.Stop();
    ioc_.poll();
  }

  template <typename T, typename Start>
  OpResult<T> Call(Start start) {
    std::promise<OpResult<T>> p;
    auto f = p.get_future();
    start([&p](OpResult<T> r) { p.set_value(std::move(r)); });
    while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) ioc_.run_one();
    return f.get();
  }

  void PutRoom(int64_t capacity) {
    core::RoomPatch patch;
    patch.capacity = capacity;
    patch.checkin_timeout_ms = 3'600'000;
    patch.grace_ms = 3'600'000;
    auto r = Call<core::RoomInfo>([&](auto done) { backend_.PutRoom("r", patch, done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }

  // A session that opens a stream (joining if new).
  void Watch(const std::string& id) {
    auto view = Call<SessionView>([&](auto done) { backend_.Check("r", id, done); });
    ASSERT_TRUE(view.ok());
    auto stream = std::make_shared<RecordingStream>(ioc_);
    streams_[id] = stream;
    hub_.Attach("r", *view, stream);
  }

  // Lets the hub run: the fake clock moves a tick at a time (and past the once-a-second limit
  // of count-only updates), the real poll timer fires in between. Done once nothing new has
  // been written for 15 steps (at least 30 steps; at most 400, as on a slow sanitizer build).
  void Settle() {
    size_t quiet = 0;
    size_t last = Written();
    for (int i = 0; i < 400 && (i < 30 || quiet < 15); ++i) {
      clock_.Advance(100);
      ioc_.run_for(std::chrono::milliseconds(3));
      size_t now = Written();
      quiet = now == last ? quiet + 1 : 0;
      last = now;
    }
  }
  size_t Written() const {
    size_t n = 0;
    for (const auto& [id, stream] : streams_) n += stream->messages.size();
    return n;
  }

  // Every open stream shows exactly what the backend says; a gone session's stream is closed.
  void ExpectStreamsMatchTheBackend(const std::string& when) {
    for (const auto& [id, stream] : streams_) {
      auto truth =
          Call<std::vector<SessionView>>([&](auto done) { backend_.Present("r", {id}, done); });
      ASSERT_TRUE(truth.ok());
      const SessionView& v = truth->front();
      ASSERT_FALSE(stream->messages.empty()) << id << " " << when;
      const json::object& shown = stream->messages.back().as_object();
      EXPECT_EQ(shown.at("status").as_string(), core::ToString(v.status)) << id << " " << when;
      if (v.status == SessionStatus::kGone) {
        EXPECT_TRUE(stream->closed) << id << " told it is gone, then closed; " << when;
        continue;
      }
      if (v.status == SessionStatus::kWaiting) {
        EXPECT_EQ(shown.at("position").as_int64(), v.position) << id << " " << when;
      }
      EXPECT_EQ(shown.at("waiting").as_int64(), v.waiting) << id << " " << when;
      EXPECT_EQ(shown.at("active").as_int64(), v.active) << id << " " << when;
      EXPECT_EQ(shown.at("capacity").as_int64(), v.capacity) << id << " " << when;
      EXPECT_EQ(shown.at("token").is_null(), v.status != SessionStatus::kActive)
          << id << " " << when;
    }
  }

  net::io_context ioc_;
  FakeClock clock_;
  store::MemoryBackend backend_;
  core::TokenSigner signer_;
  LiveHub hub_;
  std::map<std::string, std::shared_ptr<RecordingStream>> streams_;  // open ones
};

// The first message is what the session was shown: ticks with nothing new send nothing more,
// whichever phase and method the room is in (a stream of a waiting session once got its first
// status twice, the hub having noted the phase as "open" where the room's was "queue").
TEST_F(LiveHubTest, NothingNewIsNotSentAgain) {
  PutRoom(1);
  Watch("holder-Qm9vYmFyYmF6cXV4");
  Watch("waiter-Qm9vYmFyYmF6cXV4");
  Settle();
  ASSERT_EQ(streams_["waiter-Qm9vYmFyYmF6cXV4"]->messages.size(), 1u)
      << json::serialize(streams_["waiter-Qm9vYmFyYmF6cXV4"]->messages.back());
  EXPECT_EQ(streams_["waiter-Qm9vYmFyYmF6cXV4"]->messages[0].at("phase").as_string(), "queue");
  EXPECT_EQ(streams_["holder-Qm9vYmFyYmF6cXV4"]->messages.size(), 2u)
      << "the holder: its first status, then the line's growth";
}

TEST_F(LiveHubTest, AStreamOpenedWithATokenNeverShowsTheSession) {
  PutRoom(1);
  Watch("holder-Qm9vYmFyYmF6cXV4");
  auto view =
      Call<SessionView>([&](auto done) { backend_.Check("r", "holder-Qm9vYmFyYmF6cXV4", done); });
  ASSERT_TRUE(view.ok());
  auto hidden = std::make_shared<RecordingStream>(ioc_);
  hidden->FilterMessages(HideSession);
  hub_.Attach("r", *view, hidden);
  Watch("behind-Qm9vYmFyYmF6cXV4");  // a change the hub pushes to both streams
  Settle();
  ASSERT_GE(hidden->messages.size(), 2u);
  for (const json::value& m : hidden->messages) {
    if (m.as_object().at("type").as_string() != "status") continue;
    EXPECT_TRUE(m.at("session").is_null()) << json::serialize(m);
    EXPECT_EQ(m.at("status").as_string(), "active");
    EXPECT_FALSE(m.at("token").is_null());
  }
  EXPECT_EQ(streams_["holder-Qm9vYmFyYmF6cXV4"]->messages.back().at("session").as_string(),
            "holder-Qm9vYmFyYmF6cXV4")
      << "the session's own stream still names it";
}

// Anyone may open streams on a session they know: how many it keeps is bounded, and another
// one must not cost a message to each of the older ones (that made the cost their square).
TEST_F(LiveHubTest, ASessionsStreamsAreFewAndAnotherCostsTheSame) {
  PutRoom(1);
  const std::string id = "one-Qm9vYmFyYmF6cXV4YmF6";
  auto view = Call<SessionView>([&](auto done) { backend_.Check("r", id, done); });
  ASSERT_TRUE(view.ok());
  std::vector<std::shared_ptr<RecordingStream>> opened;
  for (int i = 0; i < 40; ++i) {
    auto stream = std::make_shared<RecordingStream>(ioc_);
    opened.push_back(stream);
    hub_.Attach("r", *view, stream);
    ioc_.poll();
  }
  size_t open = 0;
  size_t messages = 0;
  for (const auto& s : opened) {
    open += s->closed ? 0 : 1;
    messages += s->messages.size();
  }
  EXPECT_EQ(open, 4u) << "at most 4 per session";
  for (int i = 0; i < 36; ++i) EXPECT_TRUE(opened[i]->closed) << "the oldest closed first: " << i;
  EXPECT_LE(messages, 2u * opened.size()) << "an attach sends the new stream its status only";
  // The open ones still follow the session.
  Watch("behind-Qm9vYmFyYmF6cXV4YmF6");
  Settle();
  for (int i = 36; i < 40; ++i) {
    EXPECT_EQ(opened[i]->messages.back().at("waiting").as_int64(), 1) << i;
  }
}

// A client that vanishes without closing must stop counting as present within the room's
// check-in timeout: every stream is bound to it (heartbeats at a third of it, and the kernel's
// user timeout), including streams opened before the hub first read the room, and again when
// the room's timeout changes.
TEST_F(LiveHubTest, EveryStreamIsBoundToItsRoomsCheckInTimeout) {
  PutRoom(1);
  Watch("early-Qm9vYmFyYmF6cXV4YmF6");
  RecordingStream& early = *streams_["early-Qm9vYmFyYmF6cXV4YmF6"];
  EXPECT_EQ(early.heartbeat_interval(), LiveStreamOptions{}.heartbeat)
      << "before the room is read, the default";
  core::RoomPatch patch;
  patch.checkin_timeout_ms = 3'000;
  ASSERT_TRUE(Call<core::RoomInfo>([&](auto done) { backend_.PutRoom("r", patch, done); }).ok());
  Settle();
  EXPECT_EQ(early.heartbeat_interval(), std::chrono::milliseconds(1'000));
  Watch("late-Qm9vYmFyYmF6cXV4YmF6");
  ioc_.poll();
  EXPECT_EQ(streams_["late-Qm9vYmFyYmF6cXV4YmF6"]->heartbeat_interval(),
            std::chrono::milliseconds(1'000))
      << "a stream attached once the room is known is bound at once";
  patch.checkin_timeout_ms = 300;  // below the floor: a slow but live link keeps its stream
  ASSERT_TRUE(Call<core::RoomInfo>([&](auto done) { backend_.PutRoom("r", patch, done); }).ok());
  Settle();
  EXPECT_EQ(early.heartbeat_interval(), kMinSilenceBound / 3);
  patch.checkin_timeout_ms = 3'600'000;  // never more than the configured heartbeat
  ASSERT_TRUE(Call<core::RoomInfo>([&](auto done) { backend_.PutRoom("r", patch, done); }).ok());
  Settle();
  EXPECT_EQ(early.heartbeat_interval(), LiveStreamOptions{}.heartbeat);
}

TEST_F(LiveHubTest, EveryClientIsShownItsExactPlaceAcrossChunks) {
  PutRoom(1);
  for (int i = 0; i < 20; ++i) Watch("s" + std::to_string(i));
  Settle();
  ExpectStreamsMatchTheBackend("after the joins");
  // Three admissions in a row, with the rounds in chunks of 3.
  for (int k = 0; k < 3; ++k) {
    auto r = Call<SessionView>(
        [&](auto done) { backend_.Leave("r", "s" + std::to_string(k), true, done); });
    ASSERT_TRUE(r.ok());
  }
  Settle();
  ExpectStreamsMatchTheBackend("after three admissions");
  for (int k = 0; k < 3; ++k) {
    EXPECT_TRUE(streams_["s" + std::to_string(k)]->closed) << "left for good: told, then closed";
  }
}

TEST_F(LiveHubTest, RandomChangesEndWithEveryStreamExact) {
  std::mt19937 rng(20261123);
  PutRoom(3);
  int next_id = 0;
  std::vector<std::string> unwatched;  // sessions in the room without a stream
  auto pick = [&](const auto& container) {
    auto it = container.begin();
    std::advance(it, std::uniform_int_distribution<size_t>(0, container.size() - 1)(rng));
    return *it;
  };
  for (int batch = 0; batch < 25; ++batch) {
    int ops = std::uniform_int_distribution<int>(1, 6)(rng);
    for (int op = 0; op < ops; ++op) {
      int what = std::uniform_int_distribution<int>(0, 9)(rng);
      if (what <= 3 || streams_.empty()) {
        Watch("s" + std::to_string(next_id++));
      } else if (what == 4) {
        std::string id = "u" + std::to_string(next_id++);
        ASSERT_TRUE(Call<SessionView>([&](auto done) { backend_.Check("r", id, done); }).ok());
        unwatched.push_back(id);
      } else if (what == 5) {
        std::string id = pick(streams_).first;
        (void)Call<SessionView>(
            [&](auto done) { backend_.Leave("r", id, true, done); });  // may be gone
      } else if (what == 6) {
        std::string id = pick(streams_).first;
        (void)Call<SessionView>([&](auto done) { backend_.EndSession("r", id, done); });
      } else if (what == 7 && !unwatched.empty()) {
        std::string id = pick(unwatched);
        (void)Call<SessionView>([&](auto done) { backend_.Leave("r", id, true, done); });
      } else if (what == 8) {
        PutRoom(std::uniform_int_distribution<int64_t>(1, 6)(rng));
      } else {
        // A client hangs up: its session stays (waiting, or in grace) but is no longer watched.
        auto [id, stream] = pick(streams_);
        stream->HangUp();
        streams_.erase(id);
        unwatched.push_back(id);
      }
    }
    Settle();
    ExpectStreamsMatchTheBackend("after batch " + std::to_string(batch));
    if (HasFailure()) return;
    // Streams of sessions that are gone are closed; forget them.
    std::erase_if(streams_, [](const auto& entry) { return entry.second->closed; });
  }
}

}  // namespace
}  // namespace anteroom::server
