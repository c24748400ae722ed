// Overload: connections beyond --max-connections get one 503 with Retry-After and are closed;
// the connections already open keep working, and new ones are accepted once others close.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/server_process.h"

namespace anteroom::testing {
namespace {

constexpr std::string_view kHealth = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";

TEST(OverloadTest, ConnectionsBeyondTheLimitGet503AndTheRestKeepWorking) {
  ServerProcess server({"--max-connections", "2"});
  ASSERT_TRUE(server.started()) << server.error();

  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<RawConnection>(server.port()));
    ASSERT_TRUE(held.back()->connected());
    ASSERT_TRUE(held.back()->Send(kHealth));
    ASSERT_EQ(RawStatus(held.back()->ReadResponse()), 200);
  }

  std::string refused = RawExchange(server.port(), kHealth);
  EXPECT_EQ(RawStatus(refused), 503) << refused;
  EXPECT_EQ(RawHeader(refused, "Retry-After"), "1");
  EXPECT_NE(RawBody(refused).find("\"code\":\"unavailable\""), std::string::npos) << refused;

  // The two held connections are unaffected.
  for (auto& c : held) {
    ASSERT_TRUE(c->Send(kHealth));
    EXPECT_EQ(RawStatus(c->ReadResponse()), 200);
  }

  // Closing one frees its place (bounded wait for the server to notice the close).
  held.pop_back();
  int status = 0;
  for (int attempt = 0; attempt < 50 && status != 200; ++attempt) {
    status = RawStatus(RawExchange(server.port(),
                                   "GET /healthz HTTP/1.1\r\nHost: t\r\n"
                                   "Connection: close\r\n\r\n"));
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(server.Alive());
}

}  // namespace
}  // namespace anteroom::testing
