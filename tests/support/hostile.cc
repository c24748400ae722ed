#include "support/hostile.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace anteroom::testing {

size_t RssKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      std::istringstream in(line.substr(6));
      size_t kib = 0;
      in >> kib;
      return kib;
    }
  }
  return 0;
}

int OpenFds(pid_t pid) {
  DIR* dir = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

GoodClient::GoodClient(std::function<std::string()> ask, std::chrono::milliseconds every,
                       size_t max_calls)
    : ask_(std::move(ask)), every_(every), max_calls_(max_calls) {
  thread_ = std::thread([this] {
    for (size_t i = 0; i < max_calls_ && !stop_.load(); ++i) {
      auto start = std::chrono::steady_clock::now();
      std::string problem = ask_();
      auto took = std::chrono::steady_clock::now() - start;
      latencies_ms_.push_back(std::chrono::duration<double, std::milli>(took).count());
      if (!problem.empty()) {
        if (failed_++ == 0) first_failure_ = problem;
      }
      std::this_thread::sleep_for(every_);
    }
  });
}

GoodClient::~GoodClient() { Stop(); }

ProbeStats GoodClient::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  ProbeStats stats;
  stats.failed = failed_;
  stats.answered = latencies_ms_.size() - failed_;
  stats.first_failure = first_failure_;
  if (!latencies_ms_.empty()) {
    std::vector<double> sorted = latencies_ms_;
    std::sort(sorted.begin(), sorted.end());
    auto at = [&](double q) {
      return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * sorted.size()))];
    };
    stats.p50_ms = at(0.50);
    stats.p99_ms = at(0.99);
    stats.max_ms = sorted.back();
  }
  return stats;
}

}  // namespace anteroom::testing
