#pragma once
// Every error message the HTTP layer sends on the wire, in one place: the `message` of
// {"error": {"code", "message"}} (the `code` and the status come from ToWire() in
// op_status.h). Fixed texts are constants; texts with values in them are formatted by the
// functions below, so the wording of a rule is written once however many routes use it. The
// engine's own messages (core/, store/) are here too, in their section: every backend answers
// the same words.

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace anteroom::wire {

// --- Fields of a body ---------------------------------------------------------------------------
// A field name as a message shows it: the client's text, so printable ASCII only and at most 64
// bytes ('?' for any other byte, "..." where cut), keeping the answer short and UTF-8.
inline std::string PrintableField(std::string_view key) {
  constexpr size_t kShown = 64;
  std::string out;
  for (char c : key.substr(0, kShown)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (key.size() > kShown) out += "...";
  return out;
}
// The fields of one kind of object a body holds: what it is called, and the fields it has.
struct FieldSet {
  std::string_view what;
  std::string_view fields;
};
inline constexpr FieldSet kWebhookFields = {"a webhook", "url, types, rooms, queues"};
inline constexpr FieldSet kQueueSettingsFields = {"a queue's settings",
                                                  "fairness, limits, keep_acked"};
inline constexpr FieldSet kKeepAckedFields = {"keep_acked", "count, age_ms"};
inline constexpr FieldSet kQueueLimitFields = {"a limit", "key, rate, concurrency"};
inline constexpr FieldSet kQueueRateFields = {"a rate", "limit, period_ms, burst"};
inline constexpr FieldSet kEventFields = {
    "an event",
    "name, prequeue_at, starts_at, ends_at, shuffle_at_start, prequeue_scope, suspended, "
    "overrides"};
inline constexpr FieldSet kPassFields = {"a pass", "count, uses, expires_at, kind"};
inline constexpr FieldSet kScheduleFields = {
    "a schedule",
    "queue, cron, tz, every_ms, start_at, end_at, max_runs, overlap, misfire, misfire_grace_ms, "
    "max_catchup, jitter_ms, job"};
inline constexpr FieldSet kScheduleJobFields = {"a schedule's job",
                                                "payload, priority, group, max_attempts"};
inline constexpr FieldSet kBatchCallbackFields = {"a batch's callback",
                                                  "payload, priority, group, max_attempts"};
inline constexpr FieldSet kBatchFields = {"a batch", "id, on_success, on_complete, on_dead"};
// A field the body may not hold (a typo is refused, not ignored).
inline std::string UnknownField(std::string_view key, const FieldSet& set) {
  return fmt::format("'{}' is not a field of {} (its fields: {})", PrintableField(key), set.what,
                     set.fields);
}

// --- Names (common/names.h): path segments, query parameters and body fields ---------------
inline constexpr std::string_view kNameRule = "1-128 bytes of [A-Za-z0-9._:-]";
// What a path parameter names, as its error says it.
inline constexpr std::string_view kRoomNames = "room names";
inline constexpr std::string_view kQueueNames = "queue names";
inline constexpr std::string_view kWorkerNames = "worker names";
inline constexpr std::string_view kSessionIds = "session ids";
inline constexpr std::string_view kEventIds = "event ids";
inline constexpr std::string_view kPassIds = "pass ids";
inline constexpr std::string_view kScheduleIds = "schedule ids";
inline constexpr std::string_view kBatchIds = "batch ids";
// "room names are 1-128 bytes of [A-Za-z0-9._:-]": a path parameter that breaks the rule.
inline std::string BadPathName(std::string_view what) {
  return fmt::format("{} are {}", what, kNameRule);
}
// A WebSocket subprotocol offer that carries a credential the server cannot read.
inline std::string BadSubprotocol(std::string_view prefix) {
  return fmt::format("a subprotocol '{}' must go on with base64url (no padding)", prefix);
}

// "'worker' must be 1-128 bytes of [A-Za-z0-9._:-]": a body field or query parameter.
inline std::string BadNameField(std::string_view key) {
  return fmt::format("'{}' must be {}", key, kNameRule);
}

// --- Bodies and fields (http/json_body.h) -----------------------------------------------------
inline std::string NotJson(std::string_view why) {
  return fmt::format("the body is not valid JSON: {}", why);
}
inline constexpr std::string_view kNotAnObject = "the body must be a JSON object";
inline std::string FieldRequired(std::string_view key) {
  return fmt::format("'{}' is required", key);
}
inline std::string NotAnInteger(std::string_view key) {
  return fmt::format("'{}' must be an integer", key);
}
inline std::string IntegerOutOfRange(std::string_view key, int64_t min, int64_t max) {
  return fmt::format("'{}' must be an integer from {} to {}", key, min, max);
}
inline std::string NotABoolean(std::string_view key) {
  return fmt::format("'{}' must be a boolean", key);
}
inline std::string NotAString(std::string_view key) {
  return fmt::format("'{}' must be a string", key);
}
// A field's error inside a nested object: "'challenge': 'difficulty' must be ...".
inline std::string InField(std::string_view key, std::string_view message) {
  return fmt::format("'{}': {}", key, message);
}

// --- Router -----------------------------------------------------------------------------------
inline constexpr std::string_view kAdminKeyNeeded =
    "this route needs the admin key: Authorization: Bearer KEY, or Basic with KEY as the password";
// A kQueue route refused: which key it takes depends on the keys the server was given.
inline constexpr std::string_view kQueueKeyNeeded =
    "this route needs the queue key or the admin key: Authorization: Bearer KEY, or Basic with "
    "KEY as the password";
inline constexpr std::string_view kQueueAdminKeyNeeded =
    "this route needs the admin key (no queue key is set): Authorization: Bearer KEY, or Basic "
    "with KEY as the password";
// With --tls-client-ca: the admin and queue scopes need a certificate that CA signed, besides
// their key.
inline constexpr std::string_view kClientCertificateNeeded =
    "this route needs a TLS client certificate signed by the server's client CA, besides its key";
inline constexpr std::string_view kOwnQueueKeyNeeded =
    "this queue has a key of its own: send it (or the admin key) as Authorization: Bearer KEY";
inline constexpr std::string_view kQueueKeyShape =
    "'key' must be 16 to 256 visible ASCII characters (no spaces), or left out to have the "
    "server make one";
// The gate (server/gate_settings.h, server/gate_family.cc).
inline constexpr std::string_view kGateShape =
    "'gate' must be an object with 'cookie', 'cookie_domain', 'hosts' and 'bypass' "
    "({\"paths\": [...], \"headers\": {...}}), each optional, or null";
inline constexpr std::string_view kGateCookieName =
    "'gate.cookie' must be 1 to 64 characters of [A-Za-z0-9_-]";
inline constexpr std::string_view kGateCookieDomain = "'gate.cookie_domain' must be a host name";
inline constexpr std::string_view kGateHeaders =
    "'gate.bypass.headers' must map at most 16 header names to globs of at most 256 visible "
    "characters";
inline std::string GateListShape(std::string_view key, size_t max, std::string_view what) {
  return fmt::format("'{}' must be an array of at most {} {} (at most 256 characters each)", key,
                     max, what);
}
inline constexpr std::string_view kGateReturn =
    "'return' must be an http(s) URL (https when the site is) on a host the room allows: its "
    "target_url's host, one of its gate.hosts, a --gate-host, or this server's own";
// The waiting page's settings (server/page_settings.h). `key` is "page" or "overrides.page".
inline std::string PageShape(std::string_view key) {
  return fmt::format(
      "'{}' must be an object with 'title', 'message', 'logo_url', 'colors', 'language' and "
      "'template', each optional, or null",
      key);
}
inline std::string PageText(std::string_view key, size_t max) {
  return fmt::format(
      "'{}' must be a string of at most {} bytes of UTF-8 text, with no control characters", key,
      max);
}
inline std::string PageLogoUrl(std::string_view key) {
  return fmt::format(
      "'{}.logo_url' must be an https:// URL with a host (no user name or password), or a path "
      "on this server starting with '/' (not '//'), at most 2048 bytes",
      key);
}
inline std::string PageColors(std::string_view key) {
  return fmt::format(
      "'{}.colors' must be an object with 'background', 'text' and 'accent', each optional, "
      "each a colour written #rrggbb",
      key);
}
inline std::string PageLanguage(std::string_view key) {
  return fmt::format("'{}.language' must be one of en, de, fr, es, ja, or null", key);
}
inline std::string PageTemplate(std::string_view key) {
  return fmt::format("'{}.template' must be 1 to 64 characters of [A-Za-z0-9_-], or null", key);
}
inline constexpr std::string_view kPreviewState =
    "'state' must be one of prequeue, waiting, random, active, closed, error";
inline constexpr std::string_view kPreviewLanguage = "'lang' must be one of en, de, fr, es, ja";
inline constexpr std::string_view kPreviewTemplate =
    "'template' must name a template of --templates DIR (DIR/NAME.html)";
inline constexpr std::string_view kBareLf =
    "a line of the request head ends in a bare LF: lines end in CRLF";
inline constexpr std::string_view kTokenNotOfRoom =
    "'token' must be an admission token of this room (its signature verified)";
inline constexpr std::string_view kHistoryLimit = "'limit' must be an integer from 1 to 100";
inline constexpr std::string_view kHistoryKinds =
    "'kinds' is a comma-separated list of 'rooms' and 'queues'";
inline constexpr std::string_view kTokenOrSession = "give 'session' or 'token', not both";
inline constexpr std::string_view kEventTypes =
    "'types' must be a comma-separated list of lifecycle event types (docs/api.md#lifecycle-"
    "events)";
inline constexpr std::string_view kWebhookNames = "webhook names";
inline constexpr std::string_view kWebhookNameLength = "a webhook's name is at most 64 bytes";
inline constexpr std::string_view kWebhookUrl =
    "'url' must be an absolute http or https URL without user info, at most 2048 bytes";
inline constexpr std::string_view kWebhookTypes =
    "'types' must be a non-empty array of lifecycle event types (docs/api.md#lifecycle-events)";
inline constexpr std::string_view kWebhookRooms =
    "'rooms' must be an array of at most 100 room names";
inline constexpr std::string_view kWebhookQueues =
    "'queues' must be an array of at most 100 queue names";
inline constexpr std::string_view kTooManyWebhooks = "at most 32 webhooks may be set";
inline std::string UnknownWebhook(std::string_view name) {
  return "no webhook '" + std::string(name) + "'";
}
inline constexpr std::string_view kEventRooms =
    "'rooms' must be a comma-separated list of at most 100 room names";
inline constexpr std::string_view kLastEventId =
    "Last-Event-ID (or 'after') must be an event id as the stream sent it: <ms>-<n>";
inline constexpr std::string_view kEventsNotOnCluster =
    "lifecycle events are not kept on Redis Cluster: the admin event stream needs the embedded "
    "backend or a single Redis";
inline constexpr std::string_view kTokenNotHeld =
    "the token's admission has ended: nobody holds it any more";
inline constexpr std::string_view kGateDecisionForProxy =
    "the gate's decision answers the proxy, not a page: this request came through the public "
    "prefix (X-Forwarded-Prefix)";
inline constexpr std::string_view kGateLeaveCrossSite =
    "leaving is posted from the leave page itself: this request came from another site "
    "(Sec-Fetch-Site)";
inline constexpr std::string_view kGateNotAdmitted =
    "the token does not hold an admission of this room (expired past its admission, revoked, "
    "or of another room)";
inline constexpr std::string_view kBadTarget = "the request target is not a valid path";
// Browsers (http/origin_policy.h): the page's origin may not do this. The origin is the
// client's bytes: shown as printable ASCII only (the answer is JSON, and must stay UTF-8).
inline std::string PrintableOrigin(std::string_view origin) {
  std::string out;
  for (char c : origin.substr(0, 200)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out;
}
inline std::string OriginNotAllowed(std::string_view origin, bool cors_route) {
  return cors_route ? fmt::format(
                          "pages of {} may not call this route: allow the origin with "
                          "--cors-origin, or make it a room's target_url",
                          PrintableOrigin(origin))
                    : fmt::format("this route takes requests from its own origin only, not {}",
                                  PrintableOrigin(origin));
}
inline constexpr std::string_view kShortSessionId =
    "a session id named by a client must have at least 22 characters (128 random bits, e.g. 16 "
    "random bytes in base64url); leave 'session' out to have the server name one; shorter ids "
    "need the admin key";
inline constexpr std::string_view kBodyNotJson =
    "the body must be sent as Content-Type: application/json";
inline std::string MethodNotAllowed(std::string_view allowed) {
  return fmt::format("allowed: {}", allowed);
}
// The path as sent (percent-encoded ASCII, so the answer stays JSON).
inline std::string NoSuchRoute(std::string_view encoded_path) {
  return fmt::format("no such route: {}", encoded_path);
}

// --- Queues -----------------------------------------------------------------------------------
inline std::string JobAt(size_t index, std::string_view message) {
  return fmt::format("jobs[{}]: {}", index, message);
}
inline constexpr std::string_view kQueueLimitsRange =
    "limits out of range: a rate's limit and burst 1..1000000 and period_ms 1..86400000, "
    "concurrency 0..1000000";
inline constexpr std::string_view kQueueFairnessShape =
    "fairness must be \"fifo\" or \"round_robin\"";
inline constexpr std::string_view kQueueLimitsShape =
    "limits must be an array of at most 2 objects: {\"key\": \"group\" or null, \"rate\"?, "
    "\"concurrency\"?}";
inline constexpr std::string_view kQueueLimitKeyShape =
    "a limit's key must be \"group\" (each group on its own) or null (the whole queue)";
inline constexpr std::string_view kQueueLimitTwice = "two limits with the same key";
inline constexpr std::string_view kQueueLimitEmpty = "a limit needs a rate, a concurrency or both";
inline constexpr std::string_view kQueueRateShape =
    "a rate must be an object {\"limit\", \"period_ms\", \"burst\"?}";
inline constexpr std::string_view kRetryAfterNeedsRateLimited =
    "retry_after_ms goes with \"rate_limited\": true";
inline constexpr std::string_view kRateLimitedNeedsRetryAfter =
    "\"rate_limited\": true needs retry_after_ms (how long the group waits)";
inline constexpr std::string_view kJobNotObject = "a job must be a JSON object";
inline constexpr std::string_view kPayloadOver1MiB = "the payload is larger than 1 MiB";
inline constexpr std::string_view kPayloadNotFinite =
    "the payload holds a number beyond the range of a double (such as 1e400)";
inline constexpr std::string_view kReportNotFinite =
    "a result or progress holds a number beyond the range of a double (such as 1e400)";
inline constexpr std::string_view kPayloadTextLost = "the payload's text could not be kept";
inline constexpr std::string_view kJobsCount = "'jobs' must hold 1 to 1000 jobs";
inline std::string LeasesNotArray(std::string_view key) {
  return fmt::format("'{}' must be an array of lease strings", key);
}
inline std::string LeasesCount(std::string_view key, int min) {
  return fmt::format("'{}' must hold {} to 1000 leases", key, min);
}
inline constexpr std::string_view kLeaseNotString = "every lease must be a string";
inline constexpr std::string_view kPushAnsweredNothing = "push answered nothing";
inline constexpr std::string_view kDeadLimit = "'limit' must be 1 to 10000";
inline constexpr std::string_view kIdsNotJobIds = "'ids' must be an array of job ids";
inline constexpr std::string_view kNoSuchJob = "no such job";
inline constexpr std::string_view kDependsOnShape =
    "'depends_on' must be an array of 1 to 100 distinct job ids of this queue";
inline constexpr std::string_view kOnDependencyFailureShape =
    "'on_dependency_failure' must be \"fail\" or \"ignore\"";
inline constexpr std::string_view kKeepAckedShape =
    "'keep_acked' must be an object: {\"count\"?, \"age_ms\"?}";
inline constexpr std::string_view kResultsShape =
    "'results' must be an array with one JSON value per lease (null: none)";
inline constexpr std::string_view kAckResultsShape =
    "'ack_results' must be an array with one JSON value per lease of 'ack' (null: none)";
inline constexpr std::string_view kResultOver64KiB = "a result is larger than 64 KiB";
inline constexpr std::string_view kProgressOver4KiB = "'progress' is larger than 4 KiB";
inline constexpr std::string_view kLeaseRequired = "'lease' must be a lease string";
inline constexpr std::string_view kLogLinesShape =
    "'lines' must be an array of 1 to 100 strings, each at most 64 KiB";
inline constexpr std::string_view kJobInFlight = "the job is in flight; ack or nack it";

// --- Rooms, challenges, the live channel ------------------------------------------------------
inline constexpr std::string_view kChallengeShape =
    "'challenge' must be null or {\"type\": \"pow\", \"difficulty\": 1..24} (difficulty "
    "defaults to 16)";
inline constexpr std::string_view kTargetUrlType = "'target_url' must be a string or null";
inline constexpr std::string_view kNoChallenges = "this server hands out no challenges";
inline constexpr std::string_view kProofHalf = "send both 'challenge' and 'solution'";
inline std::string ProofBits(int bits) { return fmt::format("the solution shows {} bits", bits); }
// A join refused for want of a proof of work: how to get one, and what was wrong with the one
// sent (`proof_problem`, may be empty).
inline std::string ChallengeHowTo(std::string_view refusal, std::string_view room,
                                  std::string_view session, std::string_view proof_problem) {
  std::string message = fmt::format(
      "{}: GET /v1/rooms/{}/challenge?session={}, find a solution, and send the nonce as "
      "'challenge' and the solution as 'solution' (check: body fields; /ws and /events: query "
      "parameters)",
      refusal, room, session);
  if (!proof_problem.empty())
    message += fmt::format("; the proof sent does not do: {}", proof_problem);
  return message;
}
inline constexpr std::string_view kNotWebSocket =
    "this route is a WebSocket: send an Upgrade: websocket request, or use /events for "
    "Server-Sent Events";
inline constexpr std::string_view kNotEventStream =
    "this route is an event stream; WebSockets are served at /ws";

// target_url (server/target_url.h): "'target_url' must be ... (why)".
inline constexpr std::string_view kTargetUrlRule =
    "'target_url' must be an absolute http or https URL, or a path starting with '/'";
inline std::string TargetUrlRefused(std::string_view why) {
  return fmt::format("{} ({})", kTargetUrlRule, why);
}
inline std::string TargetUrlTooLong(size_t max) {
  return fmt::format("'target_url' is longer than {} bytes", max);
}
inline constexpr std::string_view kTargetUrlControl =
    "'target_url' must not contain control characters";

// --- Scheduled events (server/event_json.h) ---------------------------------------------------
inline constexpr std::string_view kEventOverrideFields =
    "capacity, admit_per_minute, grace_ms, checkin_timeout_ms, queueing_method, page";
inline std::string UnknownEventOverride(std::string_view key) {
  return fmt::format("'{}' is not a setting an event overrides (those are: {})",
                     PrintableField(key), kEventOverrideFields);
}
// A time field (common/wire_time.h); `nullable`: null is taken too (no such time).
inline std::string BadTime(std::string_view key, bool nullable) {
  return fmt::format(
      "'{}' must be an RFC 3339 time (such as 2026-12-01T09:00:00Z or "
      "2026-12-01T10:00:00.250+01:00) or an integer of ms since the epoch, from "
      "1970-01-01T00:00:00Z to 3000-01-01T00:00:00Z{}",
      key, nullable ? ", or null" : "");
}
// The choices of "prequeue_scope" (core::PrequeueScope), as NotOneOf lists them.
inline constexpr std::string_view kPrequeueScopes = "new, all";
inline std::string NotOneOf(std::string_view key, std::string_view choices) {
  return fmt::format("'{}' must be one of {}", key, choices);
}
inline std::string NotAnObject(std::string_view key) {
  return fmt::format("'{}' must be a JSON object", key);
}
inline std::string LongerThan(std::string_view key, size_t max) {
  return fmt::format("'{}' is longer than {} bytes", key, max);
}
inline std::string JsonLongerThan(std::string_view key, size_t max) {
  return fmt::format("'{}' is longer than {} bytes as JSON text", key, max);
}

// --- Repeatable jobs' timing (core/cron.h, common/time_zones.h) -------------------------------
inline std::string CronTooLong(size_t max_bytes) {
  return fmt::format("'cron' must be at most {} bytes", max_bytes);
}
inline std::string CronFieldCount(size_t fields) {
  return fmt::format(
      "'cron' must have 5 fields (minute hour day-of-month month day-of-week) or 6 (second "
      "first), separated by spaces; it has {}",
      fields);
}
inline std::string CronUnknownMacro(std::string_view macro) {
  return fmt::format(
      "'cron': '{}' is not a macro anteroom knows (those are @yearly, @annually, @monthly, "
      "@weekly, @daily, @midnight, @hourly)",
      PrintableField(macro));
}
// `field` names the field ("minute", "day-of-week", ...); `item` is the text at fault.
inline std::string CronBadItem(std::string_view field, std::string_view item) {
  return fmt::format(
      "'cron' {} field: '{}' is not a value, a range a-b, '*', or one of these with a step /n",
      field, PrintableField(item));
}
inline std::string CronOutOfRange(std::string_view field, std::string_view value, int min,
                                  int max) {
  return fmt::format("'cron' {} field: {} is out of its range {}-{}", field, PrintableField(value),
                     min, max);
}
inline std::string CronReversedRange(std::string_view field, std::string_view range) {
  return fmt::format("'cron' {} field: the range '{}' ends before it starts", field,
                     PrintableField(range));
}
inline std::string CronBadStep(std::string_view field, std::string_view step, int max) {
  return fmt::format("'cron' {} field: the step '{}' must be an integer from 1 to {}", field,
                     PrintableField(step), max);
}
inline constexpr std::string_view kCronNeverFires =
    "'cron' never fires: none of its months has a day of the month it names";
inline std::string UnknownTimeZone(std::string_view name) {
  return fmt::format(
      "'tz': '{}' is not a time zone of the IANA database (such as Europe/Berlin or UTC)",
      PrintableField(name));
}

// --- Schedules (core/job_schedule.h, server/schedules_family.cc) -------------------------------
inline std::string ScheduleEveryOutOfRange(int64_t min_ms) {
  return fmt::format("'every_ms' must be an integer from {} to 32503680000000", min_ms);
}
inline constexpr std::string_view kScheduleTiming =
    "a schedule needs exactly one of 'cron' (with an optional 'tz') and 'every_ms'";
inline constexpr std::string_view kScheduleTzWithoutCron =
    "'tz' applies to 'cron' only: an 'every_ms' schedule counts real milliseconds from 'start_at'";
inline constexpr std::string_view kScheduleEndsBeforeStart =
    "'end_at' must be after 'start_at' (or after now, when there is no 'start_at')";
inline constexpr std::string_view kScheduleOutOfBounds = "a schedule's value is out of its range";
inline constexpr std::string_view kOverlaps = "allow, skip";
inline constexpr std::string_view kMisfires = "skip, run_once, run_all";
inline constexpr std::string_view kScheduleNeedsJob =
    "a schedule needs 'job': {\"payload\", \"priority\"?, \"group\"?, \"max_attempts\"?}";
inline constexpr std::string_view kScheduleNeedsQueue = "a schedule needs 'queue', a queue name";
inline constexpr std::string_view kUnknownSchedule = "no such schedule";
inline constexpr std::string_view kUnknownBatch = "no such batch";
inline constexpr std::string_view kBatchSealed = "the batch is sealed: no job joins it any more";
inline constexpr std::string_view kBatchExists = "a batch of that id exists";
inline constexpr std::string_view kTooManyBatches =
    "the queue has 10,000 open batches: seal some, or wait for them to settle";
inline constexpr std::string_view kBatchCallbackShape =
    "a batch's callback is a job: {\"payload\", \"priority\"?, \"max_attempts\"?, \"group\"?}";
inline constexpr std::string_view kScheduleBusy =
    "the schedule kept changing while this change was being made; retry";
inline std::string ScheduleQueueMoved(std::string_view queue) {
  return fmt::format(
      "the schedule belongs to queue '{}'; delete it before putting it on another queue",
      PrintableField(queue));
}
inline std::string TooManySchedules(size_t max) {
  return fmt::format("at most {} schedules may exist; delete one first", max);
}

// --- Monitoring -------------------------------------------------------------------------------
inline constexpr std::string_view kNoStatsHistory = "the stats history is not kept";

// --- Backups (server/backup_family.cc, server/backup_exports.h) --------------------------------
inline constexpr std::string_view kBackupNeedsDataDir =
    "this server keeps no data directory to back up (its state is in Redis, or in memory only "
    "with --memory-only): back Redis up with BGSAVE (docs/operations.md, On Redis)";
inline constexpr std::string_view kBackupStopping = "the server is stopping: no backup was taken";
inline constexpr std::string_view kBackupOffset =
    "'offset' must be a whole number of bytes, at most the file's size";
inline std::string BackupLength(size_t max) {
  return fmt::format("'length' must be a whole number of bytes from 1 to {}", max);
}
inline std::string UnknownBackup(std::string_view id, int64_t idle_s) {
  return fmt::format(
      "no backup '{}' is open here (released, never taken, or forgotten after {} s without a "
      "read): take a new one",
      PrintableField(id), idle_s);
}
inline std::string UnknownBackupFile(std::string_view name) {
  return fmt::format("the backup has no file '{}'", PrintableField(name));
}
inline std::string TooManyBackups(size_t max) {
  return fmt::format(
      "{} backups are open: release one (DELETE /v1/admin/backups/{{id}}) or wait until one is "
      "forgotten",
      max);
}
inline std::string BackupFailed(std::string_view why) {
  return fmt::format("the backup's snapshot could not be taken: {}", why);
}

// --- The connection (http/http_server.cc, http/request_head.cc) ------------------------------
inline constexpr std::string_view kObsFold =
    "obsolete line folding (a header line starting with whitespace) is not accepted";
inline constexpr std::string_view kNoHost = "an HTTP/1.1 request needs a Host header";
inline constexpr std::string_view kManyHosts = "a request must not carry more than one Host header";
inline constexpr std::string_view kBadTransferEncoding =
    "unsupported Transfer-Encoding: chunked must be the last coding";
inline std::string BodyLargerThan(size_t limit) {
  return fmt::format("the body is larger than {} bytes", limit);
}
inline constexpr std::string_view kTrailerFields =
    "trailer fields after a chunked body are not accepted";
inline std::string HeadLargerThan(size_t limit) {
  return fmt::format("the request head is larger than {} bytes", limit);
}
inline std::string BodyTooSlow(uint64_t bytes_per_second) {
  return fmt::format("the body arrived slower than {} bytes/s", bytes_per_second);
}
inline std::string BodyStalled(int64_t ms) {
  return fmt::format("no byte of the body arrived for {} ms", ms);
}
inline std::string HeadTooSlow(int64_t ms) {
  return fmt::format("the request head did not arrive within {} ms", ms);
}
inline constexpr std::string_view kBodyTooLarge = "the body is too large";
inline constexpr std::string_view kHeadTooLarge = "the request head is too large";
inline constexpr std::string_view kTrailerTooLarge = "the chunked body's trailer is too large";
inline std::string MalformedRequest(std::string_view why) {
  return fmt::format("malformed HTTP request: {}", why);
}
inline constexpr std::string_view kRequestFailed = "the request failed";
inline constexpr std::string_view kTooManyConnections = "too many connections; retry shortly";
inline constexpr std::string_view kTooManyBodies =
    "the server holds too many unfinished request bodies; retry shortly";

// --- The engine (core/, store/): the same words from every backend ------------------------
inline std::string UnknownRoom(std::string_view room) {
  return fmt::format("no room named '{}'", room);
}
inline constexpr std::string_view kSessionNotInRoom = "the room does not know this session";
inline constexpr std::string_view kCapacityRequired = "capacity is required to create a room";
// A join refused (core::Room::JoinRefusal). Each takes its figure as text: room.lua is given the
// same words as functions of the figure (store/redis/lua_rules.cc).
inline std::string JoinNeedsChallenge(std::string_view bits) {
  return fmt::format(
      "joining this room takes a solved challenge of {} bits (room setting 'challenge')", bits);
}
inline std::string ClientTableFull(std::string_view max_clients) {
  return fmt::format(
      "this room keeps per-client limits for as many clients as it can ({}); retry later",
      max_clients);
}
inline std::string PlacesPerClientUsed(std::string_view places) {
  return fmt::format(
      "places_per_client: this client already holds as many places in this room as it may ({}); "
      "give one up (leave, or let it drop out) first",
      places);
}
inline std::string JoinsPerMinuteUsed(std::string_view joins) {
  return fmt::format(
      "joins_per_minute_per_client: this client has used up its {} joins a minute in this room",
      joins);
}
// Queueing methods (room setting `queueing_method`, core/room_event.h).
inline constexpr std::string_view kQueueingMethodShape =
    "'queueing_method' must be one of fifo, random, passthrough, reject, queue_all";
inline constexpr std::string_view kIncludeActiveNeedsQueueAll =
    "'include_active' goes with \"queueing_method\": \"queue_all\" in the same update";
// Passes (core/room_pass.h): the same words from every backend.
inline constexpr std::string_view kPassNotValid = "this pass is not valid for this room";
inline constexpr std::string_view kPassUsedUp = "this pass has been used as often as it may";
inline constexpr std::string_view kPassExpired = "this pass has expired";
inline std::string UnknownPass(std::string_view id) {
  return fmt::format("this room has no pass '{}'", id);
}
inline std::string PassIdTaken(std::string_view id) {
  return fmt::format("this room has a pass '{}' already", id);
}
inline std::string TooManyPasses(size_t cap) {
  return fmt::format("a room holds at most {} passes: revoke some first", cap);
}
inline constexpr std::string_view kPassKindShape = "'kind' must be admit or front";

// The schedule (core/schedule.cc): the same words from every backend.
inline constexpr std::string_view kPrequeueAfterStart =
    "'prequeue_at' must not be later than 'starts_at'";
inline constexpr std::string_view kEventCheckinTimeoutZero =
    "'overrides': 'checkin_timeout_ms' must be at least 1 for an event";
inline constexpr std::string_view kEndsBeforeStart = "'ends_at' must be later than 'starts_at'";
inline constexpr std::string_view kEventOver = "'ends_at' is in the past: the event would be over";
inline std::string UnknownEvent(std::string_view id) {
  return fmt::format("this room has no scheduled event '{}'", id);
}
inline std::string EventsOverlap(std::string_view other) {
  return fmt::format("the event would overlap event '{}' (from its pre-queue to its end)", other);
}
inline std::string TooManyEvents(size_t cap) {
  return fmt::format("a room holds at most {} scheduled events: delete one first", cap);
}
inline std::string EventEnded(std::string_view id) {
  return fmt::format("event '{}' has ended: it can be deleted, not changed", id);
}
inline std::string PrequeueOpened(std::string_view id) {
  return fmt::format("the pre-queue of event '{}' has opened: 'prequeue_at' cannot move", id);
}
inline std::string EventStarted(std::string_view id) {
  return fmt::format(
      "event '{}' has started: it can be shortened or ended ('ends_at' earlier), not moved or "
      "lengthened",
      id);
}
inline std::string TooManyRooms(size_t cap) {
  return fmt::format("this server holds its maximum of {} rooms (--max-rooms): delete one first",
                     cap);
}
inline std::string TooManyQueues(size_t cap) {
  return fmt::format(
      "this server holds its maximum of {} queues (--max-queues): push to an existing queue", cap);
}
inline std::string TooManyQueuesForAKey(size_t cap) {
  return fmt::format(
      "this server holds its maximum of {} queues (--max-queues): a key can be given only to an "
      "existing queue",
      cap);
}
inline constexpr std::string_view kClientHungUp = "the client hung up";
inline constexpr std::string_view kServerStopping = "the server is stopping";
inline constexpr std::string_view kQueueKeyDigestSize =
    "a queue key is stored as its SHA-256 digest (32 bytes)";
// The embedded backend's log cannot take a change (a full or failing disk: `problem` says which).
inline std::string ChangesRefused(std::string_view problem) {
  return fmt::format("changes are refused for now: {} (reads still work)", problem);
}
inline std::string ChangeNotSaved(std::string_view problem) {
  return fmt::format(
      "the change could not be saved: {}; it takes effect only if the disk recovers, so retry "
      "later",
      problem);
}
inline constexpr std::string_view kDeliveryNotSaved =
    "the delivery could not be saved; fetch again later";
inline std::string RedisUnavailable(std::string_view why) {
  return fmt::format("the Redis store is unavailable: {}; retry later", why);
}
inline std::string RedisBusy(std::string_view why) {
  return fmt::format("the Redis store is busy: {}", why);
}

}  // namespace anteroom::wire
