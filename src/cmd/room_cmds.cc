// `anteroom room create|get|list|delete` and `anteroom check`: thin clients of the API.
#include <boost/json.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <optional>

#include "anteroom/client.hpp"
#include "cmd/commands.h"

namespace anteroom::cmd {

namespace {

struct RoomFlags {
  std::string room;
  std::optional<int64_t> capacity, grace_ms, checkin_timeout_ms, idle_timeout_ms, admit_per_minute;
  bool no_idle_timeout = false;
  bool no_rate_cap = false;
  bool pause = false;
  bool resume = false;
  std::optional<std::string> target_url;
  bool no_target_url = false;
  std::string session;
};

}  // namespace

void AddRoomCommands(CLI::App& app, ClientFlags& flags) {
  auto f = std::make_shared<RoomFlags>();
  auto add_client_flags = [&flags](CLI::App* cmd) {
    AddServerFlags(cmd, flags);
    cmd->add_option("--admin-key", flags.admin_key, "Admin key (default: $ANTEROOM_ADMIN_KEY)");
  };

  CLI::App* room = app.add_subcommand("room", "Create, inspect and delete rooms");
  room->require_subcommand(1);

  CLI::App* create = room->add_subcommand("create", "Create a room, or change the fields given");
  create->add_option("room", f->room, "Room name")->required();
  create->add_option("--capacity", f->capacity, "Slots (required to create)");
  create->add_option("--grace-ms", f->grace_ms, "How long a leaving session keeps its slot");
  create->add_option("--checkin-timeout-ms", f->checkin_timeout_ms,
                     "Waiting sessions silent this long are dropped");
  create->add_option("--idle-timeout-ms", f->idle_timeout_ms,
                     "Active sessions idle this long leave");
  create->add_flag("--no-idle-timeout", f->no_idle_timeout, "Never treat active sessions as idle");
  create->add_option("--admit-per-minute", f->admit_per_minute, "Cap on admissions per minute");
  create->add_flag("--no-rate-cap", f->no_rate_cap, "Remove the admission-rate cap");
  auto* pause = create->add_flag("--pause", f->pause, "Admit nobody from the line until resumed");
  create->add_flag("--resume", f->resume, "Admit from the line again")->excludes(pause);
  auto* target = create->add_option("--target-url", f->target_url,
                                    "Where the waiting page sends admitted people");
  create->add_flag("--no-target-url", f->no_target_url, "Clear the target URL")->excludes(target);
  add_client_flags(create);
  create->callback([f, &flags] {
    boost::json::object body;
    if (f->capacity) body["capacity"] = *f->capacity;
    if (f->grace_ms) body["grace_ms"] = *f->grace_ms;
    if (f->checkin_timeout_ms) body["checkin_timeout_ms"] = *f->checkin_timeout_ms;
    if (f->idle_timeout_ms) body["idle_timeout_ms"] = *f->idle_timeout_ms;
    if (f->no_idle_timeout) body["idle_timeout_ms"] = nullptr;
    if (f->admit_per_minute) body["admit_per_minute"] = *f->admit_per_minute;
    if (f->no_rate_cap) body["admit_per_minute"] = nullptr;
    if (f->pause) body["paused"] = true;
    if (f->resume) body["paused"] = false;
    if (f->target_url) body["target_url"] = *f->target_url;
    if (f->no_target_url) body["target_url"] = nullptr;
    Client client = flags.MakeClient(flags.admin_key);
    Finish(client.PutRoom(f->room, body));
  });

  CLI::App* get = room->add_subcommand("get", "Show one room");
  get->add_option("room", f->room, "Room name")->required();
  add_client_flags(get);
  get->callback([f, &flags] { Finish(flags.MakeClient(flags.admin_key).GetRoom(f->room)); });

  CLI::App* list = room->add_subcommand("list", "List every room");
  add_client_flags(list);
  list->callback([&flags] { Finish(flags.MakeClient(flags.admin_key).ListRooms()); });

  CLI::App* del = room->add_subcommand("delete", "Delete a room and everyone in it");
  del->add_option("room", f->room, "Room name")->required();
  add_client_flags(del);
  del->callback([f, &flags] { Finish(flags.MakeClient(flags.admin_key).DeleteRoom(f->room)); });

  CLI::App* check = app.add_subcommand("check", "Join a room or check in; prints the status");
  check->add_option("room", f->room, "Room name")->required();
  check->add_option("session", f->session, "Session id (default: the server issues one)");
  add_client_flags(check);
  check->callback([f, &flags] {
    Client client = flags.MakeClient(flags.admin_key);
    std::optional<std::string_view> session;
    if (!f->session.empty()) session = f->session;
    Finish(client.Check(f->room, session));
  });
}

}  // namespace anteroom::cmd
