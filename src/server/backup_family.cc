// Backups of the embedded backend, taken while the server runs (`anteroom backup`): POST makes
// a snapshot at a cut of the log and holds it with the directory's key files; the client reads
// each file in bounded chunks (the router answers whole bodies, so a large snapshot is never
// one string), checks them, and releases the backup. A server without a data directory (Redis,
// --memory-only) answers 409: Redis is backed up with BGSAVE.
#include <boost/json.hpp>

#include <charconv>

#include "common/wire_errors.h"
#include "common/wire_time.h"
#include "server/backup_exports.h"
#include "server/families.h"

namespace anteroom::server {

namespace {

constexpr size_t kDefaultChunk = 4u << 20;

Response NoDataDir() { return ErrorReply(OpStatus::kConflict, wire::kBackupNeedsDataDir); }

// A query parameter as an unsigned number; `fallback` when absent, nullopt when not a number.
std::optional<uint64_t> QueryNumber(const Request& req, std::string_view key, uint64_t fallback) {
  const std::string* text = req.Query(key);
  if (text == nullptr) return fallback;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || text->empty()) return std::nullopt;
  return value;
}

boost::json::object ManifestJson(const BackupManifest& m) {
  boost::json::array files;
  for (const BackupFile& f : m.files) {
    files.push_back({{"name", f.name}, {"bytes", f.bytes}, {"crc32c", f.crc32c}});
  }
  return {{"id", m.id},
          {"snapshot", m.snapshot},
          {"taken_at", FormatRfc3339Ms(m.cut_ms)},
          {"taken_at_ms", m.cut_ms},
          {"files", std::move(files)},
          {"chunk_max", BackupExports::kMaxChunk},
          {"idle_timeout_ms", BackupExports::kIdleMs}};
}

// 201 with the backup's files, once its snapshot is whole.
void CmdTakeBackup(Services& s, const Request&, Respond respond) {
  if (s.backups == nullptr) return respond(NoDataDir());
  s.backups->Start([respond = std::move(respond)](OpResult<BackupManifest> r) {
    if (!r.ok()) return respond(ErrorReply(r));
    respond(JsonReply(ManifestJson(*r), 201));
  });
}

// The bytes of one file from `offset`, at most `length` (default 4 MiB, at most chunk_max).
void CmdReadBackupFile(Services& s, const Request& req, Respond respond) {
  if (s.backups == nullptr) return respond(NoDataDir());
  std::optional<uint64_t> offset = QueryNumber(req, "offset", 0);
  if (!offset) return respond(ErrorReply(OpStatus::kInvalidArgument, wire::kBackupOffset));
  std::optional<uint64_t> length = QueryNumber(req, "length", kDefaultChunk);
  if (!length || *length == 0 || *length > BackupExports::kMaxChunk) {
    return respond(
        ErrorReply(OpStatus::kInvalidArgument, wire::BackupLength(BackupExports::kMaxChunk)));
  }
  OpResult<std::string> bytes =
      s.backups->Read(req.params[0], req.params[1], *offset, static_cast<size_t>(*length));
  if (!bytes.ok()) return respond(ErrorReply(bytes));
  Response r;
  r.content_type = "application/octet-stream";
  r.body = std::move(*bytes);
  respond(std::move(r));
}

// Closes the backup's files: the snapshot may then go with the next compaction.
void CmdReleaseBackup(Services& s, const Request& req, Respond respond) {
  if (s.backups == nullptr) return respond(NoDataDir());
  OpResult<Done> r = s.backups->Release(req.params[0]);
  if (!r.ok()) return respond(ErrorReply(r));
  respond(JsonReply(boost::json::object{{"released", true}}));
}

}  // namespace

void RegisterBackupRoutes(Router& router, Services& s) {
  using namespace route_table;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::post, "/v1/admin/backups", kAdmin, kDefaultBodyLimit, kNoCors, kPlain, CmdTakeBackup},
      {verb::get, "/v1/admin/backups/{id}/files/{file}", kAdmin, kDefaultBodyLimit, kNoCors, kPlain,
       CmdReadBackupFile},
      {verb::delete_, "/v1/admin/backups/{id}", kAdmin, kDefaultBodyLimit, kNoCors, kPlain,
       CmdReleaseBackup},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
