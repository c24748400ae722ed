// `anteroom push` and `anteroom queue stats|list|dead|requeue`: thin clients of the queue API.
#include <boost/json.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "anteroom/client.hpp"
#include "cmd/commands.h"

namespace anteroom::cmd {

namespace {

boost::json::value ParseOrExit(const std::string& text, const std::string& where) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec) {
    fmt::print(stderr, "error: {} is not valid JSON: {}\n", where, ec.message());
    std::exit(2);
  }
  return v;
}

// One job as JSON text: the payload as given (checked by ParseOrExit; written back from the
// parsed value, a number could lose digits), then the options.
std::string JobText(const std::string& payload, const boost::json::object& options) {
  std::string text = R"({"payload":)" + payload;
  std::string rest = boost::json::serialize(options);  // {} or {"delay_ms":...}
  text += rest.size() > 2 ? "," + rest.substr(1) : "}";
  return text;
}

struct PushFlags {
  std::string queue;
  std::string payload;
  std::string file;
  std::optional<int64_t> delay_ms, priority, max_attempts;
  std::string dedupe_key;
};

struct QueueFlags {
  std::string queue;
  int64_t limit = 100;
  std::vector<std::string> ids;
};

}  // namespace

void AddQueueCommands(CLI::App& app, ClientFlags& flags) {
  auto add_client_flags = [&flags](CLI::App* cmd) {
    AddServerFlags(cmd, flags);
    cmd->add_option("--admin-key", flags.admin_key, "Admin key (default: $ANTEROOM_ADMIN_KEY)");
    cmd->add_option("--queue-key", flags.queue_key,
                    "Queue key, sent instead of the admin key on queue routes (default: "
                    "$ANTEROOM_QUEUE_KEY)");
  };

  auto p = std::make_shared<PushFlags>();
  CLI::App* push = app.add_subcommand("push", "Push a job (JSON payload), or many from a file");
  push->add_option("queue", p->queue, "Queue name")->required();
  CLI::Option* payload = push->add_option("payload", p->payload, "The job's payload as JSON");
  push->add_option("--file", p->file, "Newline-delimited JSON payloads, one job each ('-': stdin)")
      ->excludes(payload);
  push->add_option("--delay-ms", p->delay_ms, "Ready after this many ms");
  push->add_option("--priority", p->priority, "Higher first (default 0)");
  push->add_option("--max-attempts", p->max_attempts, "Deliveries before dead-lettering");
  push->add_option("--dedupe-key", p->dedupe_key, "Enqueue nothing if a job with it is pending");
  add_client_flags(push);
  push->callback([p, &flags] {
    boost::json::object options;
    if (p->delay_ms) options["delay_ms"] = *p->delay_ms;
    if (p->priority) options["priority"] = *p->priority;
    if (p->max_attempts) options["max_attempts"] = *p->max_attempts;
    if (!p->dedupe_key.empty()) options["dedupe_key"] = p->dedupe_key;
    Client client = flags.MakeClient(flags.DataKey());
    if (p->file.empty()) {
      if (p->payload.empty()) {
        fmt::print(stderr, "error: give a JSON payload or --file\n");
        std::exit(2);
      }
      ParseOrExit(p->payload, "the payload");
      Finish(client.Request("POST", "/v1/queues/" + Client::Segment(p->queue) + "/jobs",
                            JobText(p->payload, options)));
      return;
    }
    std::ifstream file;
    std::istream* in = &std::cin;
    if (p->file != "-") {
      file.open(p->file);
      if (!file) {
        fmt::print(stderr, "error: cannot open {}\n", p->file);
        std::exit(2);
      }
      in = &file;
    }
    // Batches of up to 1000 jobs per request, written as text like a single push.
    std::string batch;
    size_t in_batch = 0;
    std::string line;
    size_t line_no = 0;
    auto flush = [&] {
      if (in_batch == 0) return;
      HttpResult r = client.Request("POST", "/v1/queues/" + Client::Segment(p->queue) + "/jobs",
                                    R"({"jobs":[)" + batch + "]}");
      if (!r.ok()) Finish(r);
      fmt::print("{}\n", r.body);
      batch.clear();
      in_batch = 0;
    };
    while (std::getline(*in, line)) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      ParseOrExit(line, fmt::format("line {}", line_no));
      if (in_batch++) batch += ',';
      batch += JobText(line, options);
      if (in_batch == 1000) flush();
    }
    flush();
  });

  auto q = std::make_shared<QueueFlags>();
  CLI::App* queue = app.add_subcommand("queue", "Inspect queues and their dead letters");
  queue->require_subcommand(1);

  CLI::App* stats = queue->add_subcommand("stats", "Counts of one queue");
  stats->add_option("queue", q->queue, "Queue name")->required();
  add_client_flags(stats);
  stats->callback([q, &flags] { Finish(flags.MakeClient(flags.DataKey()).QueueStats(q->queue)); });

  CLI::App* list = queue->add_subcommand("list", "Every queue with its counts");
  add_client_flags(list);
  list->callback([&flags] { Finish(flags.MakeClient(flags.DataKey()).ListQueues()); });

  CLI::App* dead = queue->add_subcommand("dead", "Dead letters, oldest first");
  dead->add_option("queue", q->queue, "Queue name")->required();
  dead->add_option("--limit", q->limit, "At most this many")->capture_default_str();
  add_client_flags(dead);
  dead->callback([q, &flags] {
    Client client = flags.MakeClient(flags.DataKey());
    Finish(client.Request("GET", "/v1/queues/" + Client::Segment(q->queue) +
                                     "/dead?limit=" + std::to_string(q->limit)));
  });

  CLI::App* requeue = queue->add_subcommand("requeue", "Put dead letters back (all, or --id ...)");
  requeue->add_option("queue", q->queue, "Queue name")->required();
  requeue->add_option("--id", q->ids, "Only these job ids");
  add_client_flags(requeue);
  requeue->callback([q, &flags] {
    boost::json::object body;
    if (!q->ids.empty()) {
      boost::json::array ids;
      for (const auto& id : q->ids) ids.emplace_back(id);
      body["ids"] = std::move(ids);
    }
    Client client = flags.MakeClient(flags.admin_key);
    Finish(client.Request("POST", "/v1/queues/" + Client::Segment(q->queue) + "/dead/requeue",
                          boost::json::serialize(body)));
  });
}

}  // namespace anteroom::cmd
