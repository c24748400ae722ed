// `anteroom backup --server URL --to DIR`: a backup of a running server's embedded backend
// (POST /v1/admin/backups). Every file is read in chunks and checked against its CRC-32C as it
// arrives, the whole is recovered as the server would recover it, and only then is it renamed
// to DIR: DIR holds a whole, checked backup or nothing. Prints the backup's point as JSON.
// Exit 0: done; 1: refused or failed (nothing left behind); 2: the server could not be reached.
#include <unistd.h>

#include <fmt/format.h>
#include <boost/json.hpp>

#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#include "anteroom/client.hpp"
#include "cmd/backup_dir.h"
#include "cmd/commands.h"
#include "common/clock.h"
#include "store/log/crc32c.h"
#include "store/log/file_io.h"
#include "store/memory/memory_backend.h"

namespace anteroom::cmd {

namespace {

namespace json = boost::json;

struct BackupFlags {
  std::string to;
};

// Thrown, so that the staging directory is removed and the backup released on the way out.
struct Failure : std::runtime_error {
  Failure(const std::string& what, int code) : std::runtime_error(what), exit_code(code) {}
  int exit_code;
};

[[noreturn]] void Fail(const std::string& what, int code = 1) { throw Failure(what, code); }

// Closes a descriptor on every way out.
struct FileCloser {
  int fd;
  ~FileCloser() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void FailAnswer(const HttpResult& r, std::string_view what) {
  if (!r.error.empty()) Fail(fmt::format("{}: {}", what, r.error), 2);
  Fail(fmt::format("{}: HTTP {}: {}", what, r.status, r.body));
}

// A file name as the server sent it, only if it names a file of this directory.
bool SafeName(std::string_view name) {
  if (name.empty() || name.size() > 128 || name.front() == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_';
    if (!ok) return false;
  }
  return name != kBackupManifestName;
}

// Reads one file of the backup into the staging directory, checking its size and CRC-32C.
void FetchFile(Client& client, const std::string& id, const json::object& file, size_t chunk,
               StagingDir& staging) {
  std::string name(file.at("name").as_string());
  if (!SafeName(name)) Fail(fmt::format("the server named a file '{}': refused", name));
  uint64_t bytes = file.at("bytes").to_number<uint64_t>();
  uint32_t want = file.at("crc32c").to_number<uint32_t>();
  FileCloser file_fd{staging.Create(name)};
  int fd = file_fd.fd;
  uint64_t offset = 0;
  uint32_t crc = 0;
  std::string base = "/v1/admin/backups/" + Client::Segment(id) + "/files/" + Client::Segment(name);
  while (offset < bytes) {
    HttpResult r =
        client.Request("GET", fmt::format("{}?offset={}&length={}", base, offset, chunk));
    if (!r.ok()) FailAnswer(r, "reading " + name);
    if (r.body.empty() || r.body.size() > bytes - offset) {
      Fail(fmt::format("{}: the server sent {} bytes at offset {} of {}", name, r.body.size(),
                       offset, bytes));
    }
    size_t written = 0;
    if (int rc = store::log::WriteAll(fd, r.body, written); rc != 0) {
      Fail(fmt::format("{}/{}: cannot write: {}", staging.path(), name, store::log::ErrnoText(rc)));
    }
    crc = store::log::Crc32c(r.body, crc);
    offset += r.body.size();
  }
  if (int rc = store::log::SyncData(fd); rc != 0) {
    Fail(fmt::format("{}/{}: cannot sync: {}", staging.path(), name, store::log::ErrnoText(rc)));
  }
  if (crc != want) {
    Fail(fmt::format("{}: CRC-32C {:08x}, the server said {:08x}: damaged in transfer", name, crc,
                     want));
  }
}

void Backup(const ClientFlags& flags, const BackupFlags& f) {
  if (flags.server.rfind("http://", 0) != 0 && flags.server.rfind("https://", 0) != 0) {
    Fail(fmt::format("--server {}: an http:// or https:// URL is needed", flags.server));
  }
  if (!AbsentOrEmpty(f.to)) Fail(fmt::format("{}: not empty: back up into a new directory", f.to));
  StagingDir staging(f.to);
  Client client = flags.MakeClient(flags.admin_key);
  HttpResult taken = client.Request("POST", "/v1/admin/backups");
  if (taken.status != 201) FailAnswer(taken, "taking the backup");
  const json::object& m = taken.json.as_object();
  std::string id(m.at("id").as_string());
  // Released however this ends, so the server does not hold the snapshot until it forgets it.
  struct Release {
    Client& client;
    std::string path;
    ~Release() { client.Request("DELETE", path); }
  } release{client, "/v1/admin/backups/" + Client::Segment(id)};
  size_t chunk = static_cast<size_t>(m.at("chunk_max").to_number<uint64_t>());
  uint64_t total = 0;
  for (const json::value& file : m.at("files").as_array()) {
    FetchFile(client, id, file.as_object(), chunk, staging);
    total += file.at("bytes").to_number<uint64_t>();
  }
  json::object point{{"server", flags.server},
                     {"snapshot", m.at("snapshot")},
                     {"taken_at", m.at("taken_at")},
                     {"taken_at_ms", m.at("taken_at_ms")},
                     {"files", m.at("files")}};
  staging.Write(kBackupManifestName, json::serialize(point) + "\n");

  // Checked as the server would open it: a backup that would not restore is not kept.
  FakeClock clock(0);
  store::MemoryBackend backend(clock, {.run_timer = false});
  try {
    RecoverBackup(staging.path(), backend);
  } catch (const std::exception& e) {
    Fail(fmt::format("the backup does not recover: {}", e.what()));
  }
  store::MemoryBackend::Summary state = backend.Summarize();
  staging.Publish();
  point.erase("files");
  point["backup"] = f.to;
  point["bytes"] = total;
  point["rooms"] = state.rooms;
  point["sessions"] = state.sessions;
  point["queues"] = state.queues;
  point["jobs"] = state.jobs;
  fmt::print("{}\n", json::serialize(point));
}

}  // namespace

void AddBackupCommand(CLI::App& app, ClientFlags& flags) {
  auto f = std::make_shared<BackupFlags>();
  CLI::App* cmd = app.add_subcommand(
      "backup", "Back up a running server's embedded backend into a new directory");
  AddServerFlags(cmd, flags);
  cmd->add_option("--admin-key", flags.admin_key, "Admin key (default: $ANTEROOM_ADMIN_KEY)");
  cmd->add_option("--to", f->to, "The directory to write (absent or empty)")->required();
  cmd->callback([f, &flags] {
    int code = 0;
    try {
      Backup(flags, *f);
    } catch (const Failure& e) {
      fmt::print(stderr, "error: {}\n", e.what());
      code = e.exit_code;
    } catch (const std::exception& e) {
      fmt::print(stderr, "error: {}\n", e.what());
      code = 1;
    }
    std::exit(code);
  });
}

}  // namespace anteroom::cmd
