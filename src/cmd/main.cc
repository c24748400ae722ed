// anteroom: one binary, the server and its command-line clients.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.h"

namespace {

// `serve` asks glibc's malloc for transparent huge pages (the glibc.malloc.hugetlb tunable,
// which can only be set before the process starts, hence the re-exec). Compaction forks the
// server, and fork() copies page tables: with 2 MiB pages there are 512 times fewer to copy,
// which is what keeps the pause short with a large state (docs/benchmarks.md). Opt out with
// ANTEROOM_NO_HUGEPAGES=1.
void ReexecWithHugePages(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "serve") != 0) return;
  if (const char* no = std::getenv("ANTEROOM_NO_HUGEPAGES"); no && *no && *no != '0') return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::string value = tunables ? tunables : "";
  if (value.find("glibc.malloc.hugetlb") != std::string::npos) return;
  value = value.empty() ? "glibc.malloc.hugetlb=1" : value + ":glibc.malloc.hugetlb=1";
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);  // on failure, go on without
}

}  // namespace

int main(int argc, char** argv) {
  ReexecWithHugePages(argc, argv);
  // Logs go to stderr: stdout carries only what commands print (JSON, the listening line).
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  CLI::App app{"anteroom: fair waiting rooms and reliable queues"};
  app.require_subcommand(1);
  anteroom::cmd::ClientFlags flags;
  if (const char* key = std::getenv("ANTEROOM_ADMIN_KEY")) flags.admin_key = key;
  if (const char* key = std::getenv("ANTEROOM_QUEUE_KEY")) flags.queue_key = key;
  anteroom::cmd::AddServeCommand(app, std::vector<std::string>(argv, argv + argc));
  anteroom::cmd::AddCheckDataCommand(app);
  anteroom::cmd::AddConfigCommands(app);
  anteroom::cmd::AddRoomCommands(app, flags);
  anteroom::cmd::AddQueueCommands(app, flags);
  anteroom::cmd::AddWorkCommand(app, flags);
  anteroom::cmd::AddBackupCommand(app, flags);
  anteroom::cmd::AddRestoreCommand(app);
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
