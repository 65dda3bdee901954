#include "common/metrics/process_metrics.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace oar::metrics {
namespace {

// /proc/self/stat's fields after the command name (field 3 onwards), or
// empty; the name may hold spaces, so the split starts after its ')'.
std::vector<std::string> StatFields() {
  std::ifstream f("/proc/self/stat");
  std::string line;
  std::getline(f, line);
  const size_t close = line.rfind(')');
  std::vector<std::string> fields;
  if (close == std::string::npos) return fields;
  std::istringstream rest(line.substr(close + 1));
  for (std::string s; rest >> s;) fields.push_back(s);
  return fields;
}

double StatField(int field) {  // 1-based, as proc(5) numbers them
  const std::vector<std::string> f = StatFields();
  const size_t i = static_cast<size_t>(field - 3);
  return i < f.size() ? std::stod(f[i]) : 0;
}

}  // namespace

void AddProcessMetrics(Registry* registry) {
  static const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  // Boot time plus the process's start in ticks since boot: the wall-clock
  // start, computed once.
  static const double start = [] {
    std::ifstream f("/proc/stat");
    double btime = 0;
    for (std::string key; f >> key;) {
      if (key == "btime") {
        f >> btime;
        break;
      }
    }
    return btime + StatField(22) / ticks;
  }();
  registry->AddCallback("process_resident_memory_bytes", "Resident memory size in bytes", Type::kGauge,
                        [] { return StatField(24) * page; });
  registry->AddCallback("process_virtual_memory_bytes", "Virtual memory size in bytes", Type::kGauge,
                        [] { return StatField(23); });
  registry->AddCallback("process_cpu_seconds_total", "User and system CPU time spent in seconds", Type::kCounter,
                        [] { return (StatField(14) + StatField(15)) / ticks; });
  registry->AddCallback("process_start_time_seconds", "Start time of the process since the Unix epoch", Type::kGauge,
                        [] { return start; });
  registry->AddCallback("process_open_fds", "Open file descriptors", Type::kGauge, [] {
    std::error_code ec;
    double n = 0;
    for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      ++n;
    }
    return n;
  });
}

}  // namespace oar::metrics
