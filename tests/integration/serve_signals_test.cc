// `anteroom serve` under SIGHUP and SIGTERM, as a real process with a crowd of clients on it:
// a reload changes the admin key, the page templates and the log level while 1,000 live
// channels and 50 long polls stay connected (and the long polls then get jobs on the
// connections they began with); a drain answers every long poll with an empty list, closes
// every WebSocket with 1012 and every event stream, closes idle connections, keeps every job,
// and exits 0 well within its bound; a client that never finishes its request cannot hold the
// exit past --drain-timeout-ms.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "anteroom/client.hpp"
#include "support/live_client.h"
#include "support/redis_process.h"
#include "support/server_fixture.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = net::ip::tcp;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

bool Contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// Waits (bounded) until `done` holds.
template <typename Done>
bool Eventually(Done done, milliseconds timeout = milliseconds(10'000)) {
  auto deadline = SteadyClock::now() + timeout;
  while (!done()) {
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

// Many live channels (WebSocket) and long polls on one io_context, run by a thread of the
// test: what a thousand browsers and fifty workers look like to the server, in one process.
class Crowd {
 public:
  struct Channel {
    explicit Channel(net::io_context& io) : ws(io) {}
    websocket::stream<beast::tcp_stream> ws;
    beast::flat_buffer buffer;
    bool open = false;
    bool failed = false;  // never opened
    std::string error;
    bool closed = false;  // ended after it opened
    int close_code = 0;   // the server's close frame, if one came
    size_t messages = 0;
  };
  struct Poll {
    explicit Poll(net::io_context& io) : stream(io) {}
    beast::tcp_stream stream;
    bhttp::request<bhttp::string_body> request;
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> response;
    bool sent = false;
    bool answered = false;
    bool lost = false;  // the connection ended before an answer
    bool closed_after = false;
    char scratch[64];
  };

  explicit Crowd(uint16_t port) : endpoint_(net::ip::make_address("127.0.0.1"), port) {
    thread_ = std::thread([this] { io_.run(); });
  }
  // The sockets close with their objects, after the thread stopped running handlers.
  ~Crowd() {
    io_.stop();
    thread_.join();
  }

  void OpenChannels(const std::string& room, int n) {
    net::post(io_, [this, room, n] {
      for (int i = 0; i < n; ++i) {
        channels_.push_back(std::make_unique<Channel>(io_));
        // Ids a client names itself must be long (unguessable) when the server has keys.
        std::string session = std::to_string(i);
        session.insert(0, 24 - session.size(), '0');
        Open(*channels_.back(), "/v1/rooms/" + room + "/ws?session=s" + session);
      }
    });
  }

  void StartPolls(const std::string& queue, int n, int wait_ms, const std::string& key) {
    net::post(io_, [this, queue, n, wait_ms, key] {
      for (int i = 0; i < n; ++i) {
        polls_.push_back(std::make_unique<Poll>(io_));
        Poll& p = *polls_.back();
        p.request = {bhttp::verb::post, "/v1/queues/" + queue + "/fetch", 11};
        p.request.set(bhttp::field::host, "127.0.0.1");
        p.request.set(bhttp::field::content_type, "application/json");
        if (!key.empty()) p.request.set(bhttp::field::authorization, "Bearer " + key);
        p.request.body() = boost::json::serialize(boost::json::object{
            {"worker", "w" + std::to_string(i)}, {"wait_ms", wait_ms}, {"lease_ms", 60'000}});
        p.request.prepare_payload();
        Send(p);
      }
    });
  }

  // Reads the crowd's state on its own thread.
  template <typename Fn>
  auto Read(Fn fn) {
    std::promise<decltype(fn(channels_, polls_))> result;
    net::post(io_, [&] { result.set_value(fn(channels_, polls_)); });
    return result.get_future().get();
  }

  size_t OpenCount() {
    return Read([](auto& channels, auto&) {
      size_t n = 0;
      for (auto& c : channels) n += c->open && !c->closed;
      return n;
    });
  }
  size_t SentPolls() {
    return Read([](auto&, auto& polls) {
      size_t n = 0;
      for (auto& p : polls) n += p->sent;
      return n;
    });
  }

 private:
  void Open(Channel& c, std::string target) {
    c.ws.next_layer().async_connect(endpoint_, [this, &c, target](beast::error_code ec) {
      if (ec) {
        c.failed = true;
        c.error = ec.message();
        return;
      }
      c.ws.async_handshake("127.0.0.1", target, [this, &c](beast::error_code hec) {
        if (hec) {
          c.failed = true;
          c.error = hec.message();
          return;
        }
        c.open = true;
        ReadChannel(c);
      });
    });
  }

  void ReadChannel(Channel& c) {
    c.ws.async_read(c.buffer, [this, &c](beast::error_code ec, size_t n) {
      if (ec) {
        c.closed = true;
        c.close_code = c.ws.reason().code;
        return;
      }
      ++c.messages;
      c.buffer.consume(n);
      ReadChannel(c);
    });
  }

  void Send(Poll& p) {
    p.stream.async_connect(endpoint_, [this, &p](beast::error_code ec) {
      if (ec) {
        p.lost = true;
        return;
      }
      bhttp::async_write(p.stream, p.request, [this, &p](beast::error_code wec, size_t) {
        if (wec) {
          p.lost = true;
          return;
        }
        p.sent = true;
        bhttp::async_read(p.stream, p.buffer, p.response,
                          [this, &p](beast::error_code rec, size_t) {
                            if (rec) {
                              p.lost = true;
                              return;
                            }
                            p.answered = true;
                            WatchClose(p);
                          });
      });
    });
  }

  // After its answer: whether the server closes the connection.
  void WatchClose(Poll& p) {
    p.stream.socket().async_read_some(
        net::buffer(p.scratch), [this, &p](beast::error_code ec, size_t) {
          if (ec) {
            p.closed_after = true;
            p.stream.close();  // as a client that read `Connection: close` does
            return;
          }
          WatchClose(p);
        });
  }

  net::io_context io_;
  net::executor_work_guard<net::io_context::executor_type> work_ = net::make_work_guard(io_);
  tcp::endpoint endpoint_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::vector<std::unique_ptr<Poll>> polls_;
  std::thread thread_;
};

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

constexpr int kChannels = 1000;
constexpr int kPolls = 50;

class ServeSignalsTest : public ::testing::Test {
 protected:
  TempDir dir_{"serve-signals"};
};

TEST_F(ServeSignalsTest, SighupReloadsSettingsWhileChannelsAndLongPollsStayConnected) {
  auto root = dir_.path();
  std::filesystem::create_directories(root / "templates");
  WriteFile(root / "templates" / "wait.html", "<p>PAGE-ONE {{title}}</p>");
  WriteFile(root / "admin.key", "first-admin-key\n");
  std::string config = (root / "anteroom.toml").string();
  auto write_config = [&](const std::string& level, int max_rooms) {
    WriteFile(config, "templates = \"" + (root / "templates").string() + "\"\nadmin_key_file = \"" +
                          (root / "admin.key").string() + "\"\nlog_level = \"" + level +
                          "\"\nmax_rooms = " + std::to_string(max_rooms) +
                          "\nlive_heartbeat_ms = 1000\n");
  };
  write_config("info", 100);
  ServerProcess server({"--config", config}, {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}});
  ASSERT_TRUE(server.started()) << server.error();
  Client admin(server.url(), "first-admin-key");
  ASSERT_EQ(admin.PutRoom("r", {{"capacity", 10}}).status, 200);

  Crowd crowd(server.port());
  crowd.OpenChannels("r", kChannels);
  crowd.StartPolls("q", kPolls, 60'000, "first-admin-key");
  ASSERT_TRUE(Eventually([&] { return crowd.OpenCount() == kChannels; }, milliseconds(60'000)))
      << crowd.OpenCount() << " of " << kChannels << " channels open, "
      << crowd.Read([](auto& channels, auto&) {
           size_t n = 0;
           for (auto& c : channels) n += c->failed;
           return n;
         })
      << " failed: " << crowd.Read([](auto& channels, auto&) {
           return channels.empty() ? std::string() : channels.front()->error;
         })
      << "\n"
      << server.Errors();
  ASSERT_TRUE(Eventually([&] { return crowd.SentPolls() == kPolls; }));
  // Every channel has had a message (its status) before the reload. Open means the handshake
  // is done; the first message can still be on its way, slowly so under a sanitizer.
  auto least_messages = [&] {
    return crowd.Read([](auto& channels, auto&) {
      size_t least = SIZE_MAX;
      for (auto& c : channels) least = std::min(least, c->messages);
      return least;
    });
  };
  ASSERT_TRUE(Eventually([&] { return least_messages() >= 1; }, milliseconds(30'000)));
  size_t before = least_messages();

  // The new settings: another admin key, another page, the debug level, and a change that
  // needs a restart.
  WriteFile(root / "admin.key", "second-admin-key\n");
  WriteFile(root / "templates" / "wait.html", "<p>PAGE-TWO {{title}}</p>");
  write_config("debug", 200);
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  ASSERT_TRUE(Eventually([&] { return Contains(server.Errors(), "SIGHUP: settings reloaded"); }))
      << server.Errors();
  EXPECT_TRUE(Contains(server.Errors(), "changed: admin_key, log_level")) << server.Errors();
  EXPECT_TRUE(Contains(server.Errors(),
                       "SIGHUP: max_rooms changed, and takes effect only at a "
                       "restart"))
      << server.Errors();

  Client old_key(server.url(), "first-admin-key");
  Client new_key(server.url(), "second-admin-key");
  EXPECT_EQ(old_key.QueueStats("q").status, 401);
  EXPECT_EQ(new_key.QueueStats("q").status, 200);
  HttpResult page = new_key.Request("GET", "/wait/r");
  EXPECT_TRUE(Contains(page.body, "PAGE-TWO")) << page.status << page.body;

  // Nothing dropped: every channel still open and still hearing from the server (heartbeats
  // every second), and every long poll still parked on its connection.
  EXPECT_TRUE(Eventually([&] {
    return crowd.Read([before](auto& channels, auto&) {
      for (auto& c : channels) {
        if (c->messages < before + 2) return false;
      }
      return true;
    });
  })) << "some channel heard nothing after the reload";
  EXPECT_EQ(crowd.OpenCount(), size_t{kChannels});
  EXPECT_EQ(crowd.Read([](auto&, auto& polls) {
    size_t waiting = 0;
    for (auto& p : polls) waiting += p->sent && !p->answered && !p->lost;
    return waiting;
  }),
            size_t{kPolls});
  // A job for each long poll, answered on the connection it began with.
  for (int i = 0; i < kPolls; ++i) {
    ASSERT_EQ(new_key.Push("q", boost::json::object{{"n", i}}).status, 201);
  }
  EXPECT_TRUE(Eventually([&] {
    return crowd.Read([](auto&, auto& polls) {
      for (auto& p : polls) {
        if (!p->answered) return false;
      }
      return true;
    });
  }));
  size_t with_a_job = crowd.Read([](auto&, auto& polls) {
    size_t n = 0;
    for (auto& p : polls) {
      auto body = boost::json::parse(p->response.body());
      n += p->response.result_int() == 200 && body.at("jobs").as_array().size() == 1;
    }
    return n;
  });
  EXPECT_EQ(with_a_job, size_t{kPolls});

  // Settings that do not read keep every running one.
  WriteFile(config, "max_rooms = \"many\"\n");
  ASSERT_EQ(kill(server.pid(), SIGHUP), 0);
  ASSERT_TRUE(Eventually([&] { return Contains(server.Errors(), "did not read"); }))
      << server.Errors();
  EXPECT_EQ(new_key.QueueStats("q").status, 200);
  EXPECT_EQ(old_key.QueueStats("q").status, 401);
  EXPECT_EQ(crowd.OpenCount(), size_t{kChannels});
  EXPECT_TRUE(server.Alive());
}

TEST_F(ServeSignalsTest, SigtermDrainsEveryConnectionAndExitsZero) {
  std::string data = (dir_.path() / "data").string();
  constexpr int kDrainChannels = 200;
  constexpr int kDrainPolls = 20;
  std::optional<ServerProcess> server;
  server.emplace(std::vector<std::string>{"--data", data},
                 EnvVars{{"ANTEROOM_TOKEN_SECRET", kTokenSecret}});
  ASSERT_TRUE(server->started()) << server->error();
  Client client(server->url());
  ASSERT_EQ(client.PutRoom("r", {{"capacity", 5}}).status, 200);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(client.Push("kept", boost::json::object{{"n", i}}).status, 201);
  }
  Crowd crowd(server->port());
  crowd.OpenChannels("r", kDrainChannels);
  crowd.StartPolls("empty", kDrainPolls, 60'000, "");
  LiveClient events(server->port(), "/v1/rooms/r/events?session=sse", LiveClient::Kind::kEvents);
  ASSERT_TRUE(events.ok()) << events.error();
  ASSERT_TRUE(events.NextOf("status", milliseconds(5000)));
  RawConnection idle(server->port());
  ASSERT_TRUE(idle.Send(RawRequest("GET", "/readyz")));
  ASSERT_EQ(RawStatus(idle.ReadResponse()), 200);  // kept alive, then idle
  ASSERT_TRUE(
      Eventually([&] { return crowd.OpenCount() == kDrainChannels; }, milliseconds(30'000)));
  ASSERT_TRUE(Eventually([&] { return crowd.SentPolls() == kDrainPolls; }));
  std::this_thread::sleep_for(milliseconds(200));  // the last polls parked

  auto sent = SteadyClock::now();
  ASSERT_EQ(kill(server->pid(), SIGTERM), 0);
  int status = -1;
  ASSERT_TRUE(Eventually([&] { return !server->Alive(); }, milliseconds(8000))) << "still running";
  auto took = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - sent);
  status = server->Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << server->Errors();
  EXPECT_LT(took.count(), 5000) << server->Errors();
  EXPECT_TRUE(Contains(server->Errors(), "drained in")) << server->Errors();

  // Every long poll: 200, no job, and the connection closed after.
  auto polls = crowd.Read([](auto&, auto& polls) {
    std::vector<std::string> seen;
    for (auto& p : polls) {
      std::string what = std::to_string(p->response.result_int());
      if (!p->answered) what = "unanswered";
      if (p->answered && !p->closed_after) what += " kept open";
      if (p->answered && !p->response.keep_alive()) what += " close";
      if (p->answered) what += " " + p->response.body();
      seen.push_back(what);
    }
    return seen;
  });
  ASSERT_EQ(polls.size(), size_t{kDrainPolls});
  for (const std::string& p : polls) EXPECT_EQ(p, R"(200 close {"jobs":[]})");
  // Every WebSocket: closed by a close frame saying "service restart".
  auto codes = crowd.Read([](auto& channels, auto&) {
    std::map<int, size_t> by_code;
    for (auto& c : channels) ++by_code[c->closed ? c->close_code : -1];
    return by_code;
  });
  EXPECT_EQ(codes, (std::map<int, size_t>{{1012, kDrainChannels}}));
  // The event stream ended; the idle keep-alive connection was closed.
  EXPECT_FALSE(events.NextOf("status", milliseconds(2000)).has_value());
  EXPECT_TRUE(events.closed_by_server());
  std::string rest;
  EXPECT_TRUE(idle.ReadUntilClosed(rest, milliseconds(1000)));
  EXPECT_EQ(rest, "");

  // Nothing lost: the jobs are there after a restart on the same directory.
  server.emplace(std::vector<std::string>{"--data", data},
                 EnvVars{{"ANTEROOM_TOKEN_SECRET", kTokenSecret}});
  ASSERT_TRUE(server->started()) << server->error();
  Client again(server->url());
  HttpResult stats = again.QueueStats("kept");
  ASSERT_EQ(stats.status, 200) << stats.body;
  EXPECT_EQ(stats.json.at("ready").as_int64(), 3);
}

// On Redis the long polls are parked in the process (polls.h): the drain answers them the same
// way, and the process exits 0.
TEST_F(ServeSignalsTest, OnRedisTheDrainAnswersLongPollsAndLosesNoJob) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ServerProcess server({"--store", redis.url()}, {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}},
                       std::chrono::seconds(20));
  ASSERT_TRUE(server.started()) << server.error();
  Client client(server.url());
  ASSERT_EQ(client.Push("kept", boost::json::object{{"n", 1}}).status, 201);
  ASSERT_EQ(client.PutRoom("r", {{"capacity", 1}}).status, 200);
  Crowd crowd(server.port());
  crowd.OpenChannels("r", 20);
  crowd.StartPolls("empty", 10, 60'000, "");
  ASSERT_TRUE(Eventually([&] { return crowd.OpenCount() == 20; }));
  ASSERT_TRUE(Eventually([&] { return crowd.SentPolls() == 10; }));
  std::this_thread::sleep_for(milliseconds(300));  // the last polls parked
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  ASSERT_TRUE(Eventually([&] { return !server.Alive(); }, milliseconds(8000))) << "still running";
  int status = server.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << server.Errors();
  auto answers = crowd.Read([](auto& channels, auto& polls) {
    std::map<std::string, size_t> seen;
    for (auto& p : polls) {
      ++seen[p->answered ? std::to_string(p->response.result_int()) + " " + p->response.body()
                         : "unanswered"];
    }
    for (auto& c : channels) ++seen["ws " + std::to_string(c->close_code)];
    return seen;
  });
  EXPECT_EQ(answers, (std::map<std::string, size_t>{{R"(200 {"jobs":[]})", 10}, {"ws 1012", 20}}));
  ServerProcess again({"--store", redis.url()}, {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}},
                      std::chrono::seconds(20));
  ASSERT_TRUE(again.started()) << again.error();
  HttpResult stats = Client(again.url()).QueueStats("kept");
  ASSERT_EQ(stats.status, 200) << stats.body;
  EXPECT_EQ(stats.json.at("ready").as_int64(), 1);
}

TEST_F(ServeSignalsTest, AClientThatNeverFinishesItsRequestCannotHoldTheExitPastTheBound) {
  ServerProcess server({"--memory-only", "--drain-timeout-ms", "700"});
  ASSERT_TRUE(server.started()) << server.error();
  RawConnection slow(server.port());
  ASSERT_TRUE(
      slow.Send("POST /v1/queues/q/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                "\r\n{\"payload\":"));  // the body never comes
  std::this_thread::sleep_for(milliseconds(100));
  auto sent = SteadyClock::now();
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  ASSERT_TRUE(Eventually([&] { return !server.Alive(); }, milliseconds(5000)));
  auto took = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - sent);
  int status = server.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_GE(took.count(), 600);
  EXPECT_LT(took.count(), 3000);
  EXPECT_TRUE(Contains(server.Errors(), "drain bound reached")) << server.Errors();
}

TEST_F(ServeSignalsTest, ASecondSigtermStopsAtOnce) {
  ServerProcess server({"--memory-only", "--drain-timeout-ms", "60000"});
  ASSERT_TRUE(server.started()) << server.error();
  RawConnection slow(server.port());
  ASSERT_TRUE(slow.Send("GET /readyz HTTP/1.1\r\nHost: x\r\n"));  // the head never ends
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  ASSERT_TRUE(Eventually([&] { return Contains(server.Errors(), "draining"); }));
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_TRUE(server.Alive());
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  ASSERT_TRUE(Eventually([&] { return !server.Alive(); }, milliseconds(5000)));
  int status = server.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(Contains(server.Errors(), "stopping now")) << server.Errors();
}

}  // namespace
}  // namespace anteroom::testing
