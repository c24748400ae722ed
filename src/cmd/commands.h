#pragma once
// CLI wiring only: each file adds its subcommands to the app.

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdlib>

#include <string>
#include <vector>

#include "anteroom/client.hpp"

namespace anteroom::cmd {

// Flags every client command shares.
struct ClientFlags {
  std::string server = "http://127.0.0.1:8080";
  std::string admin_key;  // defaults to $ANTEROOM_ADMIN_KEY
  std::string queue_key;  // defaults to $ANTEROOM_QUEUE_KEY
  // The key sent on queue routes (push, fetch, ack, stats, ...): the queue key when given,
  // else the admin key (which the server also takes there).
  const std::string& DataKey() const { return queue_key.empty() ? admin_key : queue_key; }
};

// Prints a client command's answer; exits 2 on a transport error, 1 on anything but 2xx.
inline void Finish(const HttpResult& r) {
  if (!r.error.empty()) {
    fmt::print(stderr, "error: {}\n", r.error);
    std::exit(2);
  }
  fmt::print("{}\n", r.body);
  if (!r.ok()) std::exit(1);
}

// `argv`: the whole command line, which SIGHUP reads again.
void AddServeCommand(CLI::App& app, const std::vector<std::string>& argv);
void AddCheckDataCommand(CLI::App& app);
void AddConfigCommands(CLI::App& app);
void AddRoomCommands(CLI::App& app, ClientFlags& flags);
void AddQueueCommands(CLI::App& app, ClientFlags& flags);
void AddWorkCommand(CLI::App& app, ClientFlags& flags);
void AddBackupCommand(CLI::App& app, ClientFlags& flags);
void AddRestoreCommand(CLI::App& app);

}  // namespace anteroom::cmd
