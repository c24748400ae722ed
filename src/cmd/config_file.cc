#include "cmd/config_file.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <boost/json/serialize.hpp>
#include <boost/json/string_view.hpp>

#include <toml++/toml.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

namespace anteroom::cmd {

namespace {

// Options that are no key of a file: a config file names no other one, and --help is an action.
bool IsFileKey(const CLI::Option& opt) {
  std::string name = opt.get_name(false, true);
  return opt.get_configurable() && name.starts_with("--") && name != "--help" &&
         name != "--help-all";
}

std::string KeyOf(const CLI::Option& opt) {
  std::string key = opt.get_name(false, true).substr(2);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

CLI::Option* OptionOfKey(CLI::App& serve, const std::string& key) {
  if (key.find('-') != std::string::npos) return nullptr;  // keys are spelled with _
  std::string flag = "--" + key;
  std::replace(flag.begin() + 2, flag.end(), '_', '-');
  CLI::Option* opt = serve.get_option_no_throw(flag);
  return opt != nullptr && IsFileKey(*opt) ? opt : nullptr;
}

std::string BaseType(const CLI::Option& opt) {
  std::string type = opt.get_type_name();
  return type.substr(0, type.find(':'));
}

bool IsFlag(const CLI::Option& opt) { return opt.get_expected_min() == 0; }
bool IsList(const CLI::Option& opt) { return opt.get_items_expected_max() > 1; }
bool IsInteger(const CLI::Option& opt) {
  std::string type = BaseType(opt);
  return type == "INT" || type == "UINT";
}

// What a key takes, in words, from the option's type and checks ("an integer 1..1000000").
std::string Expected(const CLI::Option& opt) {
  if (IsFlag(opt)) return "true or false";
  if (IsList(opt)) return "an array of strings";
  std::string type = opt.get_type_name();
  std::smatch range;
  if (IsInteger(opt)) {
    static const std::regex kRange(R"(in \[(-?[0-9]+) - (-?[0-9]+)\])");
    if (std::regex_search(type, range, kRange)) {
      return fmt::format("an integer {}..{}", range[1].str(), range[2].str());
    }
    return BaseType(opt) == "UINT" ? "an integer >= 0" : "an integer";
  }
  static const std::regex kMembers(R"(\{([^}]*)\})");
  if (std::regex_search(type, range, kMembers)) {
    std::string members = range[1].str();
    std::string out;
    std::stringstream split(members);
    for (std::string m; std::getline(split, m, ',');) {
      out += (out.empty() ? "" : ", ") + fmt::format("\"{}\"", m);
    }
    return "one of " + out;
  }
  return "a string";
}

// A TOML basic string: JSON's escapes are TOML's (toml++ would write a 'literal string').
std::string Quote(const std::string& text) {
  return boost::json::serialize(boost::json::string_view(text));
}

std::string Render(const toml::node& node) {
  if (node.is_string()) return Quote(node.as_string()->get());
  std::ostringstream out;
  node.visit([&](const auto& v) { out << v; });
  return out.str();
}

int LineOf(const toml::source_region& where) { return static_cast<int>(where.begin.line); }

// The file's value as the strings CLI11 takes, or an error saying what the key takes.
std::optional<std::vector<std::string>> Strings(const CLI::Option& opt, const toml::node& node,
                                                std::string* error, int* line) {
  auto wrong = [&] {
    *error = fmt::format("expected {}, got {}", Expected(opt), Render(node));
    return std::nullopt;
  };
  if (IsFlag(opt)) {
    if (!node.is_boolean()) return wrong();
    return std::vector<std::string>{node.as_boolean()->get() ? "true" : "false"};
  }
  if (IsList(opt)) {
    if (node.is_string()) return std::vector<std::string>{node.as_string()->get()};
    if (!node.is_array()) return wrong();
    std::vector<std::string> items;
    for (const toml::node& item : *node.as_array()) {
      if (!item.is_string()) {
        *line = LineOf(item.source());
        *error = fmt::format("expected an array of strings, got {}", Render(item));
        return std::nullopt;
      }
      items.push_back(item.as_string()->get());
    }
    return items;
  }
  if (IsInteger(opt)) {
    if (!node.is_integer()) return wrong();
    int64_t n = node.as_integer()->get();
    if (n < 0 && BaseType(opt) == "UINT") return wrong();
    return std::vector<std::string>{std::to_string(n)};
  }
  if (!node.is_string()) return wrong();
  return std::vector<std::string>{node.as_string()->get()};
}

// The key of `names` nearest to `key` by edit distance, if near enough to be a typo.
std::string Nearest(const std::string& key, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = 3;
  for (const std::string& name : names) {
    std::vector<size_t> row(name.size() + 1);
    for (size_t j = 0; j <= name.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= key.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= name.size(); ++j) {
        size_t up = row[j];
        row[j] =
            std::min({row[j] + 1, row[j - 1] + 1, diagonal + (key[i - 1] == name[j - 1] ? 0 : 1)});
        diagonal = up;
      }
    }
    if (row[name.size()] < best_distance) {
      best_distance = row[name.size()];
      best = name;
    }
  }
  return best;
}

struct Problem {
  int line;
  std::string text;
};

bool ReadWhole(const std::string& path, std::string* text, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = fmt::format("cannot read {}: {}", path, std::strerror(errno));
    return false;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return true;
}

// Mode bits for group or others: a file holding a secret should be the owner's alone.
std::optional<unsigned> OpenToOthers(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || (st.st_mode & 077) == 0) return std::nullopt;
  return st.st_mode & 0777;
}

void ApplyFile(CLI::App& serve, ServeFlags& flags, ServeSettings& out) {
  const std::string& path = flags.config;
  std::string text;
  std::string error;
  if (!ReadWhole(path, &text, &error)) {
    out.errors.push_back(fmt::format("{}: {}", path, error));
    return;
  }
  toml::table table;
  try {
    table = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    out.errors.push_back(
        fmt::format("{}:{}: {}", path, LineOf(e.source()), std::string(e.description())));
    return;
  }
  std::vector<std::string> names;
  for (const CLI::Option* opt : serve.get_options()) {
    if (IsFileKey(*opt)) names.push_back(KeyOf(*opt));
  }
  std::vector<Problem> problems;
  for (auto&& [key, node] : table) {
    std::string name(key.str());
    int line = LineOf(key.source());
    CLI::Option* opt = OptionOfKey(serve, name);
    if (opt == nullptr) {
      std::string near = Nearest(name, names);
      problems.push_back({line, fmt::format("{}: unknown key{}", name,
                                            near.empty() ? "" : " (did you mean " + near + "?)")});
      continue;
    }
    if (opt->count() > 0) continue;  // given on the command line, which wins
    std::optional<std::vector<std::string>> values = Strings(*opt, node, &error, &line);
    if (!values) {
      problems.push_back({line, name + ": " + error});
      continue;
    }
    try {
      opt->add_result(*values);
      opt->run_callback();
      out.file_lines[name] = line;
    } catch (const CLI::Error& e) {
      // CLI11 says "--flag-name: what is wrong"; the file's reader wants the key's name.
      std::string why = e.what();
      if (why.starts_with("--")) why = why.substr(std::min(why.size(), why.find(": ") + 2));
      if (IsInteger(*opt) || why.find(" not in ") != std::string::npos) {
        why = fmt::format("expected {}, got {}", Expected(*opt), Render(node));
      } else {
        why = fmt::format("{} (got {})", why, Render(node));
      }
      problems.push_back({line, name + ": " + why});
    }
  }
  std::stable_sort(problems.begin(), problems.end(),
                   [](const Problem& a, const Problem& b) { return a.line < b.line; });
  for (const Problem& p : problems) {
    out.errors.push_back(fmt::format("{}:{}: {}", path, p.line, p.text));
  }
}

// A secret the server takes, and where it may come from, in order of precedence: the command
// line (its flag or its file's flag), the environment, the config file (its key or its file's
// key). Only one may be given on one level.
struct Secret {
  const char* name;
  const char* value_flag;  // nullptr: no flag of its own (it would show in ps)
  const char* file_flag;
  const char* env;
  std::string ServeFlags::*target;
};

const Secret kSecrets[] = {
    {"admin_key", nullptr, "--admin-key-file", "ANTEROOM_ADMIN_KEY", &ServeFlags::admin_key},
    {"queue_key", "--queue-key", "--queue-key-file", "ANTEROOM_QUEUE_KEY", &ServeFlags::queue_key},
    {"token_secret", nullptr, "--token-secret-file", "ANTEROOM_TOKEN_SECRET",
     &ServeFlags::token_secret},
    {"store", "--store", "--store-file", "ANTEROOM_REDIS_URL", &ServeFlags::store},
};

// A secret file's content, trailing newline stripped.
bool ReadSecretFile(const std::string& path, std::string* secret, std::string* error,
                    std::string* warning) {
  if (!ReadWhole(path, secret, error)) return false;
  while (!secret->empty() && (secret->back() == '\n' || secret->back() == '\r')) {
    secret->pop_back();
  }
  if (secret->empty()) {
    *error = path + " is empty";
    return false;
  }
  if (auto mode = OpenToOthers(path)) {
    *warning =
        fmt::format("{} (a secret) may be read by others (mode {:04o}): chmod 600 it", path, *mode);
  }
  return true;
}

void ResolveSecret(const Secret& s, CLI::App& serve, ServeFlags& flags, const EnvLookup& env,
                   ServeSettings& out) {
  CLI::Option* value_opt = s.value_flag ? serve.get_option(s.value_flag) : nullptr;
  CLI::Option* file_opt = serve.get_option(s.file_flag);
  std::string value_key = s.name;
  std::string file_key = KeyOf(*file_opt);
  auto from_file = [&](const std::string& key) { return out.file_lines.count(key) > 0; };
  bool value_cli = value_opt && value_opt->count() > 0 && !from_file(value_key);
  bool file_cli = file_opt->count() > 0 && !from_file(file_key);
  if (value_cli && file_cli) {
    out.errors.push_back(fmt::format("{} and {}: give one", s.value_flag, s.file_flag));
    return;
  }
  std::string& target = flags.*s.target;
  if (value_cli) {
    out.secret_sources[s.name] = s.value_flag;
    return;
  }
  std::string where;  // of a secret file: the flag, or the file's line and key
  if (!file_cli) {
    const char* from_env = env(s.env);
    if (from_env != nullptr && *from_env != '\0') {
      target = from_env;
      out.secret_sources[s.name] = std::string("environment ") + s.env;
      return;
    }
    if (from_file(value_key) && from_file(file_key)) {
      out.errors.push_back(fmt::format("{}:{}: {}: {} is set too (line {}): give one", flags.config,
                                       out.file_lines[file_key], file_key, value_key,
                                       out.file_lines[value_key]));
      return;
    }
    if (from_file(value_key)) {
      out.secret_sources[s.name] = fmt::format("{}:{}", flags.config, out.file_lines[value_key]);
      if (auto mode = OpenToOthers(flags.config)) {
        out.warnings.push_back(fmt::format(
            "{} holds {} and may be read by others (mode {:04o}): chmod 600 it, or use {}",
            flags.config, value_key, *mode, file_key));
      }
      return;
    }
    if (!from_file(file_key)) return;  // not given anywhere
    where = fmt::format("{}:{}: {}", flags.config, out.file_lines[file_key], file_key);
  } else {
    where = s.file_flag;
  }
  std::string path = file_opt->as<std::string>();
  std::string error;
  std::string warning;
  std::string secret;
  if (!ReadSecretFile(path, &secret, &error, &warning)) {
    out.errors.push_back(where + ": " + error);
    return;
  }
  if (!warning.empty()) out.warnings.push_back(warning);
  target = std::move(secret);
  out.secret_sources[s.name] = file_cli ? std::string(s.file_flag) : file_key;
}

bool IsSecretValueKey(const std::string& key) {
  return std::any_of(std::begin(kSecrets), std::end(kSecrets),
                     [&](const Secret& s) { return key == s.name; });
}

}  // namespace

std::string ServeSettings::ErrorText() const {
  std::string text;
  for (const std::string& e : errors) text += (text.empty() ? "" : "\n") + e;
  return text;
}

ServeSettings SettleServeFlags(CLI::App& serve, ServeFlags& flags, const EnvLookup& env) {
  ServeSettings out;
  out.file = flags.config;
  if (!flags.config.empty()) ApplyFile(serve, flags, out);
  EnvLookup lookup = env ? env : EnvLookup([](const char* name) { return std::getenv(name); });
  for (const Secret& s : kSecrets) ResolveSecret(s, serve, flags, lookup, out);
  return out;
}

std::string MaskUrlPassword(const std::string& url) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  size_t start = scheme + 3;
  size_t end = url.find_first_of("/?#", start);
  size_t at = url.rfind('@', end == std::string::npos ? url.size() : end);
  if (at == std::string::npos || at < start) return url;
  size_t colon = url.find(':', start);
  if (colon == std::string::npos || colon > at) return url;  // a user name, no password
  return url.substr(0, colon + 1) + "****" + url.substr(at);
}

std::string DescribeSettings(const CLI::App& serve, const ServeFlags& flags,
                             const ServeSettings& settings) {
  auto source_of = [&](const std::string& key, const CLI::Option* opt) -> std::string {
    if (auto it = settings.file_lines.find(key); it != settings.file_lines.end()) {
      return fmt::format("{}:{}", settings.file, it->second);
    }
    if (opt != nullptr && opt->count() > 0) return "command line";
    return "default";
  };
  std::string text;
  for (const CLI::Option* opt : serve.get_options()) {
    if (!IsFileKey(*opt)) continue;
    std::string key = KeyOf(*opt);
    if (IsSecretValueKey(key)) continue;  // listed below with the other secrets
    std::string value;
    if (IsList(*opt)) {
      value = "[";
      for (const std::string& item : opt->results()) {
        value += (value.size() > 1 ? ", " : "") + Quote(item);
      }
      value += "]";
    } else {
      std::string raw = opt->count() > 0 ? opt->as<std::string>() : opt->get_default_str();
      if (IsFlag(*opt)) {
        value = opt->count() > 0 && raw != "false" ? "true" : "false";
      } else if (IsInteger(*opt)) {
        value = raw.empty() ? "0" : raw;
      } else {
        value = Quote(raw);
      }
    }
    text += fmt::format("{} = {} ({})\n", key, value, source_of(key, opt));
  }
  for (const Secret& s : kSecrets) {
    std::string value = flags.*s.target;
    auto from = settings.secret_sources.find(s.name);
    std::string source = from == settings.secret_sources.end() ? "not set" : "from " + from->second;
    if (std::string(s.name) == "store") {
      if (value.empty() && from == settings.secret_sources.end()) source = "default: none";
      value = MaskUrlPassword(value);
    } else if (!value.empty()) {
      value = "****";
    }
    text += fmt::format("{} = {} ({})\n", s.name, Quote(value), source);
  }
  return text;
}

}  // namespace anteroom::cmd
