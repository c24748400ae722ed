// `anteroom restore --from BACKUP --data DIR [--inflight requeue|keep]`: a backup (or a stopped
// server's data directory) made into a new data directory for `anteroom serve --data DIR`. The
// backup is recovered offline, the in-flight rule applied by the engine, and the state written
// as one fresh snapshot beside the secret and token keys, so tokens and leases made before still
// verify. DIR must be absent or empty: a restore never mixes with another state.
//
// --inflight requeue (the default): jobs leased at the backup go back to the head of their
// queue, ready, without using up an attempt (their workers are gone, not at fault). keep: they
// stay leased as they were, and come back when their leases run out (counted as expired), or
// are acked by workers that still hold the lease.
// Exit 0: restored; 1: refused or failed (DIR left as it was).
#include <fmt/format.h>
#include <boost/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "cmd/backup_dir.h"
#include "cmd/commands.h"
#include "common/clock.h"
#include "store/log/data_dir.h"
#include "store/log/file_io.h"
#include "store/log/snapshot_file.h"
#include "store/memory/memory_backend.h"

namespace anteroom::cmd {

namespace {

namespace fs = std::filesystem;

struct RestoreFlags {
  std::string from;
  std::string data;
  std::string inflight = "requeue";
};

// What a data directory holds besides its state, copied as they are (data_dir.h).
constexpr const char* kKeyFiles[] = {"secret", "token-eddsa.pem", "token-es256.pem"};

void Restore(const RestoreFlags& f) {
  if (!fs::is_directory(f.from)) throw std::runtime_error(f.from + ": not a directory");
  if (!AbsentOrEmpty(f.data)) {
    throw std::runtime_error(
        f.data + ": not empty: restore into a new data directory (nothing was changed)");
  }
  // A server's data directory (no backup.json) may be read only while no server writes it.
  std::optional<store::log::DirLock> lock;
  if (!fs::exists(fs::path(f.from) / kBackupManifestName)) lock.emplace(f.from);

  FakeClock clock(0);  // the state keeps its own times; nothing here reads the clock's
  store::MemoryBackend backend(clock, {.run_timer = false});
  uint64_t snapshot = RecoverBackup(f.from, backend);
  size_t requeued = f.inflight == "requeue" ? backend.ReturnAllInflight() : 0;

  StagingDir staging(f.data);
  for (const char* name : kKeyFiles) {
    std::string content;
    int error = 0;
    if (!store::log::ReadFile(f.from + "/" + name, content, error)) {
      if (error == ENOENT) continue;
      throw std::runtime_error(
          fmt::format("{}/{}: {}", f.from, name, store::log::ErrnoText(error)));
    }
    staging.Write(name, content);
  }
  store::log::CheckDataFormat(staging.path(), store::log::ListDir(staging.path()),
                              /*mark=*/true);
  std::string path = staging.path() + "/" + store::log::SnapshotName(snapshot);
  int rc;
  {
    std::unique_lock world(backend.world());
    rc = store::log::WriteSnapshotFile(path + ".tmp", snapshot,
                                       [&](ByteWriter& out) { backend.SaveState(out); });
  }
  if (rc != 0 || std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    throw std::runtime_error(
        fmt::format("{}: cannot write: {}", path, store::log::ErrnoText(rc ? rc : errno)));
  }
  // The new directory must open as the server will open it.
  {
    store::MemoryBackend check(clock, {.run_timer = false});
    RecoverBackup(staging.path(), check);
  }
  store::MemoryBackend::Summary state = backend.Summarize();
  staging.Publish();
  fmt::print("{}\n", boost::json::serialize(boost::json::object{{"restored", f.data},
                                                                {"from", f.from},
                                                                {"snapshot", snapshot},
                                                                {"inflight", f.inflight},
                                                                {"requeued", requeued},
                                                                {"rooms", state.rooms},
                                                                {"sessions", state.sessions},
                                                                {"queues", state.queues},
                                                                {"jobs", state.jobs}}));
}

}  // namespace

void AddRestoreCommand(CLI::App& app) {
  auto f = std::make_shared<RestoreFlags>();
  CLI::App* cmd = app.add_subcommand(
      "restore", "Restore a backup into a new data directory, for anteroom serve --data DIR");
  cmd->add_option("--from", f->from, "The backup (or a stopped server's data directory)")
      ->required();
  cmd->add_option("--data", f->data, "The data directory to create (absent or empty)")->required();
  cmd->add_option("--inflight", f->inflight,
                  "Jobs leased at the backup: requeue (ready again, no attempt used) or keep "
                  "(leased until their leases run out)")
      ->check(CLI::IsMember({"requeue", "keep"}))
      ->capture_default_str();
  cmd->callback([f] {
    try {
      Restore(*f);
    } catch (const std::exception& e) {
      fmt::print(stderr, "error: {}\n", e.what());
      std::exit(1);
    }
    std::exit(0);
  });
}

}  // namespace anteroom::cmd
