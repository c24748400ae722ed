#pragma once
// anteroom-bench: the load generators, built apart from the product (as redis-benchmark is
// apart from redis-server). Each file adds one subcommand; the client flags are the product
// CLI's, so `--server` and the keys read the same in both.

#include <CLI/CLI.hpp>

#include "cmd/commands.h"

namespace anteroom::load {

using cmd::ClientFlags;

void AddRoomsCommand(CLI::App& app, ClientFlags& flags);   // rooms.cc
void AddQueueCommand(CLI::App& app, ClientFlags& flags);   // queue.cc
void AddLiveCommand(CLI::App& app, ClientFlags& flags);    // live.cc
void AddLaunchCommand(CLI::App& app, ClientFlags& flags);  // launch.cc

}  // namespace anteroom::load
