#include "http/fd_limit.h"

#include <sys/resource.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace anteroom::http {

size_t ConnectionsThatFit(size_t wanted, size_t soft_limit) {
  size_t reserve = std::min(kReservedFds, soft_limit / 4);
  return std::max<size_t>(1, std::min(wanted, soft_limit - reserve));
}

FdFit FitConnectionsToFds(size_t wanted) {
  FdFit fit;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("getrlimit(RLIMIT_NOFILE): {}; keeping --max-connections {}", std::strerror(errno),
                 wanted);
    fit.max_connections = wanted;
    fit.soft_limit = fit.hard_limit = wanted + kReservedFds;  // unknown: as if it fitted
    return fit;
  }
  if (limit.rlim_cur < limit.rlim_max) {
    rlim_t before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      spdlog::warn("raising RLIMIT_NOFILE from {} to {}: {}", before, limit.rlim_max,
                   std::strerror(errno));
      limit.rlim_cur = before;
    }
  }
  // RLIM_INFINITY is never the case for descriptors in practice; bound it all the same.
  auto as_size = [](rlim_t v) {
    return v == RLIM_INFINITY ? size_t{1} << 30 : static_cast<size_t>(v);
  };
  fit.soft_limit = as_size(limit.rlim_cur);
  fit.hard_limit = as_size(limit.rlim_max);
  fit.max_connections = ConnectionsThatFit(wanted, fit.soft_limit);
  fit.clamped = fit.max_connections < wanted;
  if (fit.clamped) {
    spdlog::warn(
        "--max-connections {} does not fit RLIMIT_NOFILE {} (hard limit {}): at most {} "
        "connections (the rest of the descriptors are kept for files, Redis and refusals); "
        "raise the limit (ulimit -n, LimitNOFILE=) to allow more",
        wanted, fit.soft_limit, fit.hard_limit, fit.max_connections);
  } else {
    spdlog::info("file descriptors: RLIMIT_NOFILE {}, at most {} connections", fit.soft_limit,
                 fit.max_connections);
  }
  return fit;
}

}  // namespace anteroom::http
