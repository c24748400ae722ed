// anteroom-bench rooms | queue | live | launch: load generators against a running `anteroom serve`
// (loopback, bounded). Scripts in scripts/bench-*.sh drive them; docs/benchmarks.md has the
// figures and the commands that reproduce them.
#include <CLI/CLI.hpp>

#include <cstdlib>

#include "load/load.h"

int main(int argc, char** argv) {
  CLI::App app{"anteroom-bench: load generators for anteroom (loopback, bounded)"};
  app.require_subcommand(1);
  anteroom::load::ClientFlags flags;
  if (const char* key = std::getenv("ANTEROOM_ADMIN_KEY")) flags.admin_key = key;
  if (const char* key = std::getenv("ANTEROOM_QUEUE_KEY")) flags.queue_key = key;
  anteroom::load::AddRoomsCommand(app, flags);
  anteroom::load::AddQueueCommand(app, flags);
  anteroom::load::AddLiveCommand(app, flags);
  anteroom::load::AddLaunchCommand(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
