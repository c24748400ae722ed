// Hostile clients, WebSocket frames: what RFC 6455 says a server must refuse is refused with the
// close code it names, the stream's session leaves the way a closed stream does, and a flood of
// pings is answered without the server holding more than one at a time. Against the real
// server, over a raw socket (a well-behaved client library would never send these frames).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "support/api_checks.h"
#include "support/server_fixture.h"
#include "support/server_process.h"

namespace anteroom::testing {
namespace {

using std::chrono::milliseconds;

// One client frame: FIN and opcode in the first byte, the payload masked unless `masked` is
// false (clients must mask, RFC 6455 5.1).
std::string Frame(uint8_t first, std::string_view payload, bool masked = true) {
  std::string out;
  out += static_cast<char>(first);
  uint8_t mask_bit = masked ? 0x80 : 0;
  if (payload.size() < 126) {
    out += static_cast<char>(mask_bit | payload.size());
  } else {
    out += static_cast<char>(mask_bit | 126);
    out += static_cast<char>((payload.size() >> 8) & 0xff);
    out += static_cast<char>(payload.size() & 0xff);
  }
  const char key[4] = {0x11, 0x22, 0x33, 0x44};
  if (masked) out.append(key, 4);
  for (size_t i = 0; i < payload.size(); ++i) {
    out += masked ? static_cast<char>(payload[i] ^ key[i % 4]) : payload[i];
  }
  return out;
}

constexpr uint8_t kText = 0x81;           // FIN + text
constexpr uint8_t kTextFirstPart = 0x01;  // text, more to come
constexpr uint8_t kContinuation = 0x80;   // FIN + continuation
constexpr uint8_t kPing = 0x89;

// The close code of the first close frame among the server's frames in `data`, or -1 when
// there is none.
int CloseCodeIn(const std::string& data) {
  for (size_t i = 0; i + 1 < data.size();) {
    uint8_t op = static_cast<uint8_t>(data[i]) & 0x0f;
    size_t len = static_cast<uint8_t>(data[i + 1]) & 0x7f;
    size_t head = 2;
    if (len == 126) {
      if (i + 4 > data.size()) return -1;
      len = (static_cast<uint8_t>(data[i + 2]) << 8) | static_cast<uint8_t>(data[i + 3]);
      head = 4;
    }
    if (op == 0x8) {
      if (len < 2 || i + head + 2 > data.size()) return -1;
      return (static_cast<uint8_t>(data[i + head]) << 8) | static_cast<uint8_t>(data[i + head + 1]);
    }
    i += head + len;
  }
  return -1;
}

class HostileFramesTest : public ServerTest {
 protected:
  // A raw connection whose WebSocket upgrade on the live channel was accepted (frames sent
  // before the 101 arrives are not read: clients wait for it, RFC 6455 4.1).
  std::unique_ptr<RawConnection> Upgraded(const std::string& session) {
    auto c = std::make_unique<RawConnection>(server().port());
    EXPECT_TRUE(c->Send(
        RawRequest("GET", "/v1/rooms/r/ws?session=" + session, {},
                   {"Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13",
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="})));
    std::string head = c->ReadResponse(milliseconds(5000));
    EXPECT_EQ(RawStatus(head), 101) << head;
    return c;
  }
  // Sends `frames` on a fresh upgraded stream; the close code the server answered.
  int CloseCodeFor(const std::string& frames) {
    auto c = Upgraded("frames-Qm9vYmFyYmF6cXV4");
    c->Send(frames);
    std::string data;
    EXPECT_TRUE(c->ReadUntilClosed(data, milliseconds(5000))) << "the server closed";
    return CloseCodeIn(data);
  }
};

TEST_F(HostileFramesTest, FramesTheRfcRefusesGetTheirCloseCodes) {
  MustPut("r", {{"capacity", 5}});
  EXPECT_EQ(CloseCodeFor(Frame(kText, std::string(5000, 'x'))), 1009)
      << "a message over the 4 KiB clients may send: too big";
  EXPECT_EQ(CloseCodeFor(Frame(kText, "hello", /*masked=*/false)), 1002)
      << "an unmasked client frame: protocol error";
  EXPECT_EQ(CloseCodeFor(Frame(kText, "\xc3\x28 not UTF-8")), 1007)
      << "a text message that is not UTF-8: bad payload";
  EXPECT_EQ(CloseCodeFor(Frame(kContinuation, "orphan")), 1002)
      << "a continuation with nothing to continue";
  EXPECT_EQ(CloseCodeFor(Frame(kTextFirstPart, std::string(3000, 'a')) +
                         Frame(kContinuation, std::string(3000, 'b'))),
            1009)
      << "fragments that add up past the limit";
  EXPECT_EQ(CloseCodeFor(Frame(0x83, "x")), 1002) << "a reserved opcode";
  // The server is still well.
  EXPECT_EQ(client().Health().status, 200);
}

TEST_F(HostileFramesTest, APingFloodIsAnsweredAndTheStreamGoesOn) {
  MustPut("r", {{"capacity", 1}});
  auto c = Upgraded("pinger-Qm9vYmFyYmF6cXV4");
  std::string flood;
  for (int i = 0; i < 2000; ++i) flood += Frame(kPing, "p");
  ASSERT_TRUE(c->Send(flood));
  // The stream still carries the session: another person joining moves its counts.
  ASSERT_TRUE(IsSession(client().Check("r", "other-Qm9vYmFyYmF6cXV4"), "waiting"));
  std::string data;
  c->ReadUntilClosed(data, milliseconds(1500));  // not closed: the time runs out
  EXPECT_EQ(CloseCodeIn(data), -1) << "pings are no reason to close";
  EXPECT_NE(data.find("\"waiting\":1"), std::string::npos)
      << "the status went on after the flood: " << data.substr(0, 300);
  HttpResult room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "active"), 1) << "the pinging stream still holds its slot";
  EXPECT_EQ(client().Health().status, 200);
}

}  // namespace
}  // namespace anteroom::testing
