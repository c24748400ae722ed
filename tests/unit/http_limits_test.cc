// The pieces of the HTTP layer's defences that need no socket: the I/O loop that survives a
// throwing handler, the budget of unfinished bodies, the descriptor fit, the head checks, and
// the router's stream-route match.
#include <gtest/gtest.h>

#include <boost/asio/post.hpp>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "http/body_budget.h"
#include "http/fd_limit.h"
#include "http/io_pool.h"
#include "http/request_head.h"
#include "http/router.h"

namespace anteroom::http {
namespace {

TEST(IoPoolTest, AHandlerThatThrowsDoesNotStopItsThread) {
  IoPool pool(2);
  std::atomic<int> after{0};
  for (auto* ctx : pool.Contexts()) {
    boost::asio::post(*ctx, [] { throw std::length_error("field value too large"); });
    boost::asio::post(*ctx, [&] { ++after; });
  }
  boost::asio::post(pool.Main(), [&] {
    // Every context has run past its throwing handler once this runs on the main one; the
    // other thread's second handler may still be on its way.
    while (after.load() < 2) std::this_thread::yield();
    pool.Stop();
  });
  pool.Run();
  EXPECT_EQ(after.load(), 2);
}

TEST(BodyBudgetTest, ReservesUpToTheLimitThenRefusesAndCutsTheStalestFirst) {
  auto budget = BodyBudget::Make(100);
  int cut_a = 0, cut_b = 0, cut_c = 0;
  auto a = budget->Reserve(40, 0, [&] { ++cut_a; });
  auto b = budget->Reserve(40, 0, [&] { ++cut_b; });
  ASSERT_TRUE(a && b);
  EXPECT_EQ(budget->held(), 80u);
  a->Progress(10, 500);    // a sent something at 500 ms
  b->Progress(10, 1'500);  // b more recently
  // At 1,600 ms: 40 more do not fit. b made progress 100 ms ago (spared), a 1,100 ms ago: cut.
  EXPECT_EQ(budget->Reserve(40, 1'600, [&] { ++cut_c; }), nullptr);
  EXPECT_EQ(cut_a, 1);
  EXPECT_EQ(cut_b, 0);
  EXPECT_EQ(budget->refused(), 1u);
  // Asked again before a is gone: a is already being cut, nothing more is.
  EXPECT_EQ(budget->Reserve(40, 1'700, [&] { ++cut_c; }), nullptr);
  EXPECT_EQ(cut_a, 1);
  EXPECT_EQ(cut_b, 0);
  a.reset();  // its connection closed
  EXPECT_EQ(budget->held(), 40u);
  auto c = budget->Reserve(40, 1'800, [&] { ++cut_c; });
  EXPECT_TRUE(c);
  EXPECT_EQ(budget->held(), 80u);
  b.reset();
  c.reset();
  EXPECT_EQ(budget->held(), 0u);
}

TEST(BodyBudgetTest, ABodyLargerThanTheWholeBudgetIsRefusedWithoutCuttingEveryone) {
  auto budget = BodyBudget::Make(100);
  int cuts = 0;
  auto a = budget->Reserve(30, 0, [&] { ++cuts; });
  EXPECT_EQ(budget->Reserve(500, 5'000, [&] { ++cuts; }), nullptr);
  EXPECT_EQ(cuts, 0) << "it would not fit with everyone cut: nobody is";
  EXPECT_EQ(budget->held(), 30u);
}

TEST(FdLimitTest, TheCapFitsBelowTheLimitKeepingDescriptorsForTheRest) {
  EXPECT_EQ(ConnectionsThatFit(100'000, 20'000), 20'000 - kReservedFds);
  EXPECT_EQ(ConnectionsThatFit(5'000, 20'000), 5'000u);
  EXPECT_EQ(ConnectionsThatFit(100'000, 400), 300u);  // a quarter kept when the limit is small
  EXPECT_EQ(ConnectionsThatFit(100'000, 1), 1u);
}

TEST(RequestHeadTest, HeadEndAndObsFold) {
  EXPECT_EQ(HeadEnd("GET / HTTP/1.1\r\nHost: x\r\n\r\nrest"), 27u);
  EXPECT_EQ(HeadEnd("GET / HTTP/1.1\r\nHost: x\r\n"), std::string_view::npos);
  EXPECT_FALSE(CheckRawHead("GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n\r\n"));
  EXPECT_TRUE(CheckRawHead("GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n c\r\n\r\n"));
  EXPECT_TRUE(CheckRawHead("GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n\tc\r\n\r\n"));
  // A bare LF in a head not yet whole: refused at once; a CR that has not arrived yet is not.
  EXPECT_TRUE(HasBareLf("GET / HTTP/1.1\nHost: x\n"));
  EXPECT_TRUE(HasBareLf("GET / HTTP/1.1\r\nHost: x\nTransfer-Encoding: chunked\r\n"));
  EXPECT_TRUE(HasBareLf("\nGET / HTTP/1.1\r\n"));
  EXPECT_FALSE(HasBareLf("GET / HTTP/1.1\r\nHost: x\r"));
  EXPECT_FALSE(HasBareLf("\r\nGET / HTTP/1.1\r\nHost: x\r\n"));
  EXPECT_TRUE(CheckRawHead("GET / HTTP/1.1\r\n Host: x\r\n\r\n"));
}

// Beast's parser cannot be moved: it lives on the heap here.
const RequestParser& Parsed(std::string_view head) {
  static std::vector<std::unique_ptr<RequestParser>> kept;
  kept.push_back(std::make_unique<RequestParser>());
  RequestParser& parser = *kept.back();
  ConfigureRequestParser(parser);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(head.data(), head.size()), ec);
  EXPECT_FALSE(ec) << ec.message();
  return parser;
}

TEST(RequestHeadTest, HostTransferEncodingAndLength) {
  EXPECT_FALSE(CheckParsedHead(Parsed("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 10));
  EXPECT_FALSE(CheckParsedHead(Parsed("GET / HTTP/1.0\r\n\r\n"), 10));
  auto no_host = CheckParsedHead(Parsed("GET / HTTP/1.1\r\n\r\n"), 10);
  ASSERT_TRUE(no_host);
  EXPECT_EQ(no_host->status, OpStatus::kInvalidArgument);
  EXPECT_TRUE(CheckParsedHead(Parsed("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 10));
  auto gzip =
      CheckParsedHead(Parsed("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"), 10);
  EXPECT_TRUE(gzip);
  auto big =
      CheckParsedHead(Parsed("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n"), 10);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, OpStatus::kPayloadTooLarge);
}

TEST(RouterStreamTest, OnlyTheStreamRoutesThemselvesMayStream) {
  Router router("");
  auto noop = [](const Request&, Respond) {};
  router.Add(http::verb::get, "/v1/rooms/{room}/ws", noop, {.stream = true});
  router.Add(http::verb::get, "/v1/rooms/{room}/events", noop, {.stream = true});
  EXPECT_TRUE(router.MayStream("/v1/rooms/r/ws"));
  EXPECT_TRUE(router.MayStream("/v1/rooms/r/events?session=abc"));
  EXPECT_TRUE(router.MayStream("/v1/rooms/a%2Fb/ws"));
  EXPECT_FALSE(router.MayStream("/v1/queues/q/ws"));
  EXPECT_FALSE(router.MayStream("/v1/queues/q/events"));
  EXPECT_FALSE(router.MayStream("/ws"));
  EXPECT_FALSE(router.MayStream("/v1/rooms/ws"));
  EXPECT_FALSE(router.MayStream("/v1/rooms/r/x/ws"));
}

}  // namespace
}  // namespace anteroom::http
