// Prints a Redis script as anteroom sends it: the core's rules and messages (lua_rules.cc), the
// prelude and room.lua or queue.lua. The Redis benchmarks (scripts/bench-redis.sh,
// bench/redis/present_cost.py) load it into redis-server themselves.
//
//   assembled_script room|queue
#include <cstdio>
#include <cstring>
#include <string>

#include "store/redis/lua_rules.h"
#include "store/redis/lua_scripts.h"

int main(int argc, char** argv) {
  namespace lua = anteroom::store::redis::lua;
  const char* script = nullptr;
  if (argc == 2 && std::strcmp(argv[1], "room") == 0) script = lua::kRoom;
  if (argc == 2 && std::strcmp(argv[1], "queue") == 0) script = lua::kQueue;
  if (script == nullptr) {
    std::fprintf(stderr, "usage: assembled_script room|queue\n");
    return 2;
  }
  std::string text = anteroom::store::redis::LuaRules() + script;
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}
