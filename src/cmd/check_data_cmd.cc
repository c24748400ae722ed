// `anteroom check-data DIR`: verifies a data directory offline, changing nothing. It replays the
// whole directory as start-up would, so a directory it passes is one the server will open.
// Exit 0: whole (a torn tail, which start-up truncates, is a warning); 1: damaged or unusable.
#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <filesystem>

#include "cmd/commands.h"
#include "common/clock.h"
#include "store/log/embedded_store.h"
#include "store/memory/memory_backend.h"

namespace anteroom::cmd {

namespace {

int CheckData(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) {
    fmt::print(stderr, "error: {}: not a directory\n", dir);
    return 1;
  }
  try {
    store::log::DirLock lock(dir);  // the server must not be writing while we read
    FakeClock clock(0);
    store::MemoryBackend backend(clock, {.run_timer = false});
    store::log::RecoveryReport report;
    store::log::Recover(dir, backend, /*repair=*/false, report);
    for (const auto& w : report.warnings) fmt::print(stderr, "warning: {}\n", w);
    auto state = backend.Summarize();
    fmt::print("{}: ok\n", dir);
    if (report.snapshot) {
      fmt::print("snapshot: {} ({} bytes of state)\n", report.snapshot, report.snapshot_bytes);
    } else {
      fmt::print("snapshot: none\n");
    }
    if (report.segments.empty()) {
      fmt::print("log: empty\n");
    } else {
      fmt::print("log: segments {}..{}, {} records, {} bytes\n", report.segments.front(),
                 report.segments.back(), report.records, report.log_bytes);
    }
    fmt::print("state: {} rooms ({} sessions), {} queues ({} jobs)\n", state.rooms, state.sessions,
               state.queues, state.jobs);
    fmt::print("checked in {:.3f} s\n", report.seconds);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}

}  // namespace

void AddCheckDataCommand(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "check-data", "Verify a data directory offline (the server must be stopped)");
  cmd->add_option("DIR", *dir, "The data directory")->required();
  cmd->callback([dir] { std::exit(CheckData(*dir)); });
}

}  // namespace anteroom::cmd
