#pragma once
// CLI wiring only: each file adds its subcommands to the app.

#include <CLI/CLI.hpp>

#include <string>

namespace anteroom::cmd {

// Flags every client command shares.
struct ClientFlags {
  std::string server = "http://127.0.0.1:8080";
  std::string admin_key;  // defaults to $ANTEROOM_ADMIN_KEY
};

void AddServeCommand(CLI::App& app);
void AddRoomCommands(CLI::App& app, ClientFlags& flags);
void AddQueueCommands(CLI::App& app, ClientFlags& flags);
void AddWorkCommand(CLI::App& app, ClientFlags& flags);
void AddBenchCommands(CLI::App& app, ClientFlags& flags);
void AddBenchQueueCommand(CLI::App& bench, ClientFlags& flags);

}  // namespace anteroom::cmd
