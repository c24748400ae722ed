#pragma once
// A gtest fixture that starts a fresh `anteroom serve` for each test and a keep-alive Client.

#include <gtest/gtest.h>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <memory>
#include <string>
#include <vector>

#include "anteroom/client.hpp"
#include "support/api_checks.h"
#include "support/server_process.h"

namespace anteroom::testing {

inline constexpr char kTokenSecret[] = "integration-test-secret";

class ServerTest : public ::testing::Test {
 protected:
  // Override to start the server differently.
  virtual std::vector<std::string> ServerArgs() const { return {}; }
  virtual EnvVars ServerEnv() const { return {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}}; }
  virtual std::string AdminKey() const { return {}; }

  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(ServerArgs(), ServerEnv());
    ASSERT_TRUE(server_->started()) << server_->error();
    client_ = std::make_unique<Client>(server_->url(), AdminKey());
  }

  void TearDown() override {
    client_.reset();
    if (server_) {
      EXPECT_TRUE(server_->Alive()) << "the server died during the test; stdout:\n"
                                    << server_->Output() << "\nstderr:\n"
                                    << server_->Errors();
      server_->Stop();
    }
  }

  Client& client() { return *client_; }
  ServerProcess& server() { return *server_; }

  // PUT that must succeed.
  boost::json::value MustPut(const std::string& room, const boost::json::object& config) {
    HttpResult r = client_->PutRoom(room, config);
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    return r.json;
  }

  // The room's GET answer as JSON text ("" with a failure if GET did not answer 200).
  std::string Snapshot(const std::string& room) {
    HttpResult r = client_->GetRoom(room);
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    return r.status == 200 ? boost::json::serialize(r.json) : std::string();
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Client> client_;
};

}  // namespace anteroom::testing
