#include "cli/launch_summary.h"

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace oar::cli {
namespace {

// The sum of the samples whose key is `name` or starts with `name{`.
double Sum(const std::map<std::string, double>& m, const std::string& name) {
  double s = 0;
  for (auto it = m.lower_bound(name); it != m.end() && it->first.rfind(name, 0) == 0; ++it) {
    if (it->first.size() == name.size() || it->first[name.size()] == '{') s += it->second;
  }
  return s;
}

double OpSeconds(const std::map<std::string, double>& m, const char* op) {
  auto it = m.find(absl::StrFormat("oar_trainer_rpc_op_seconds_total{op=\"%s\"}", op));
  return it == m.end() ? 0 : it->second;
}

}  // namespace

std::map<std::string, double> ReadMetricsFile(const std::string& path) {
  std::map<std::string, double> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double v = 0;
    if (space == std::string::npos || !absl::SimpleAtod(line.substr(space + 1), &v)) continue;
    out[line.substr(0, space)] = v;
  }
  return out;
}

std::vector<std::string> TimeSplitLines(const std::vector<std::string>& names, const std::vector<std::string>& files) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < names.size() && i < files.size(); ++i) {
    const auto m = ReadMetricsFile(files[i]);
    std::string who = names[i];
    const size_t dot = who.find('.');
    if (dot != std::string::npos) who[dot] = ' ';
    if (m.empty()) {
      lines.push_back(who + ": no metrics (the process wrote none)");
      continue;
    }
    if (names[i].rfind("trainer", 0) == 0) {
      const double step = Sum(m, "oar_trainer_step_duration_seconds_sum");
      const double send = OpSeconds(m, "send");
      const double barrier = OpSeconds(m, "send_barrier") + OpSeconds(m, "fetch_barrier");
      const double receive = OpSeconds(m, "recv") + OpSeconds(m, "prefetch");
      lines.push_back(absl::StrFormat(
          "%s: %.2f s of steps = compute %.2f s, send %.2f s, barrier wait %.2f s, receive %.2f s", who, step,
          std::max(0.0, step - send - barrier - receive), send, barrier, receive));
    } else {
      lines.push_back(absl::StrFormat("%s: optimize %.2f s, serving %.2f s (handler threads' time)", who,
                                      Sum(m, "oar_pserver_optimize_duration_seconds_sum"),
                                      Sum(m, "oar_pserver_request_duration_seconds_sum")));
    }
  }
  return lines;
}

}  // namespace oar::cli
