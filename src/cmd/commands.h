#pragma once
// CLI wiring only: each file adds its subcommands to the app.

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdlib>

#include <string>
#include <vector>

#include "anteroom/client.hpp"

namespace anteroom::cmd {

// Flags every client command shares.
struct ClientFlags {
  std::string server = "http://127.0.0.1:8080";
  std::string admin_key;  // defaults to $ANTEROOM_ADMIN_KEY
  std::string queue_key;  // defaults to $ANTEROOM_QUEUE_KEY
  // The key sent on queue routes (push, fetch, ack, stats, ...): the queue key when given,
  // else the admin key (which the server also takes there).
  const std::string& DataKey() const { return queue_key.empty() ? admin_key : queue_key; }
  ClientTls tls;  // for an https:// server
  Client MakeClient(const std::string& key) const { return Client(server, key, tls); }
};

// --server and, for an https:// one, whom to trust and the certificate to show.
inline void AddServerFlags(CLI::App* cmd, ClientFlags& flags) {
  cmd->add_option("--server", flags.server, "anteroom server URL (http:// or https://)")
      ->capture_default_str();
  cmd->add_option("--cacert", flags.tls.ca_file,
                  "https: the CA file to verify the server with (default: the system's CAs)");
  cmd->add_option("--client-cert", flags.tls.cert_file,
                  "https: a client certificate (PEM chain) for a server that asks for one");
  cmd->add_option("--client-key", flags.tls.key_file, "https: the client certificate's key (PEM)");
}

// Prints a client command's answer; exits 2 on a transport error, 1 on anything but 2xx.
inline void Finish(const HttpResult& r) {
  if (!r.error.empty()) {
    fmt::print(stderr, "error: {}\n", r.error);
    std::exit(2);
  }
  fmt::print("{}\n", r.body);
  if (!r.ok()) std::exit(1);
}

// `argv`: the whole command line, which SIGHUP reads again.
void AddServeCommand(CLI::App& app, const std::vector<std::string>& argv);
void AddCheckDataCommand(CLI::App& app);
void AddConfigCommands(CLI::App& app);
void AddRoomCommands(CLI::App& app, ClientFlags& flags);
void AddQueueCommands(CLI::App& app, ClientFlags& flags);
void AddWorkCommand(CLI::App& app, ClientFlags& flags);
void AddBackupCommand(CLI::App& app, ClientFlags& flags);
void AddRestoreCommand(CLI::App& app);

}  // namespace anteroom::cmd
