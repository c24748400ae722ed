// anteroom: one binary, the server and its command-line clients.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <exception>
#include <memory>

#include "cmd/commands.h"

int main(int argc, char** argv) {
  // Logs go to stderr: stdout carries only what commands print (JSON, the listening line).
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  CLI::App app{"anteroom: fair waiting rooms and reliable queues"};
  app.require_subcommand(1);
  anteroom::cmd::ClientFlags flags;
  if (const char* key = std::getenv("ANTEROOM_ADMIN_KEY")) flags.admin_key = key;
  anteroom::cmd::AddServeCommand(app);
  anteroom::cmd::AddCheckDataCommand(app);
  anteroom::cmd::AddRoomCommands(app, flags);
  anteroom::cmd::AddQueueCommands(app, flags);
  anteroom::cmd::AddWorkCommand(app, flags);
  anteroom::cmd::AddBenchCommands(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {  // start-up failures: bad address, port taken, ...
    spdlog::error("{}", e.what());
    return 1;
  }
  return 0;
}
