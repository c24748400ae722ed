// `anteroom config check FILE`: the file settled as `serve --config FILE` settles it, then the
// effective settings printed (secrets masked), or the errors.
#include <fmt/format.h>

#include <cstdlib>
#include <memory>

#include "cmd/commands.h"
#include "cmd/config_file.h"
#include "cmd/serve_flags.h"

namespace anteroom::cmd {

namespace {

int CheckConfig(const std::string& file) {
  ServeFlags flags;
  CLI::App serve{"serve", "serve"};
  AddServeFlags(serve, flags);
  for (CLI::Option* opt : serve.get_options()) opt->capture_default_str();
  serve.parse(std::vector<std::string>{file, "--config"});  // CLI11 takes a vector last first
  ServeSettings settings = SettleServeFlags(serve, flags);
  for (const std::string& warning : settings.warnings) fmt::print(stderr, "warning: {}\n", warning);
  if (!settings.ok()) {
    fmt::print(stderr, "{}\n", settings.ErrorText());
    return 1;
  }
  fmt::print("{}", DescribeSettings(serve, flags, settings));
  return 0;
}

}  // namespace

void AddConfigCommands(CLI::App& app) {
  CLI::App* config = app.add_subcommand("config", "Config files of `anteroom serve --config`");
  config->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  CLI::App* check = config->add_subcommand(
      "check",
      "Check a config file as `serve --config FILE` would, and print the effective settings "
      "(secrets masked) with where each came from; exits 1 with the errors if it is not valid");
  check->add_option("FILE", *file, "The TOML config file")->required();
  check->callback([file] { std::exit(CheckConfig(*file)); });
}

}  // namespace anteroom::cmd
