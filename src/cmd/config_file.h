#pragma once
// `anteroom serve --config FILE`: a TOML file whose keys are serve's flags (the long name with _
// for -), fed into the same CLI11 options the command line fills, so each flag's own checks
// apply to the file's values; and the secrets the server takes, from the command line, the
// environment or files. `anteroom config check` settles a file by this same code.

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cmd/serve_flags.h"

namespace anteroom::cmd {

// What settling serve's flags found: errors name the file, the line and the key
// ("anteroom.toml:7: max_rooms: expected an integer, got \"ten\"").
struct ServeSettings {
  std::string file;                       // the config file, if any
  std::vector<std::string> errors;        // in the file's line order; any one stops the server
  std::vector<std::string> warnings;      // e.g. a secret file others may read
  std::map<std::string, int> file_lines;  // key -> line, for the file's keys that took effect
  std::map<std::string, std::string> secret_sources;  // admin_key -> "admin_key_file", ...
  bool ok() const { return errors.empty(); }
  std::string ErrorText() const;  // the errors, one a line
};

// How a secret is looked up, for tests; std::getenv otherwise.
using EnvLookup = std::function<const char*(const char*)>;

// After `serve` parsed its command line: reads flags.config (when set) into the options the
// command line left unset, each checked as its flag checks it, then takes each secret from the
// first place that gives it: the command line, the environment, the file.
ServeSettings SettleServeFlags(CLI::App& serve, ServeFlags& flags, const EnvLookup& env = {});

// The effective settings, one `key = value (where from)` a line, secrets masked.
std::string DescribeSettings(const CLI::App& serve, const ServeFlags& flags,
                             const ServeSettings& settings);

// A Redis URL with its password masked (redis://:****@host:6379).
std::string MaskUrlPassword(const std::string& url);

}  // namespace anteroom::cmd
