#include "cli/launch_summary.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace oar::cli {
namespace {

// The sum of the samples whose key is `name` or starts with `name{`.
// A process as the summary names it: "trainer.1.run2" -> "trainer 1.run2".
std::string Shown(std::string process) {
  const size_t dot = process.find('.');
  if (dot != std::string::npos) process[dot] = ' ';
  return process;
}

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

// A collective backend's name (Collective::backend()) as the summary says it.
std::string TransportWords(const std::string& backend) {
  if (backend == "shm") return "shared memory";
  if (backend == "tcp-ring") return "the TCP ring";
  if (backend == "nccl") return "NCCL";
  return backend;
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

std::vector<std::string> TimeSplitLines(const LaunchShape& shape, const std::vector<std::string>& names,
                                        const std::vector<std::string>& files) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < names.size() && i < files.size(); ++i) {
    const auto m = ReadMetricsFile(files[i]);
    const std::string who = Shown(names[i]);
    if (m.empty()) {
      lines.push_back(who + ": no metrics (the process wrote none)");
      continue;
    }
    const auto collective = m.find("oar_trainer_collective_seconds_total");
    if (names[i].rfind("trainer", 0) == 0 && shape.nccl2) {
      lines.push_back(absl::StrFormat(
          "%s: %.2f s of steps, all-reduce across trainers %.2f s (on its own thread, overlapping compute)", who,
          Sum(m, "oar_trainer_step_duration_seconds_sum"), collective == m.end() ? 0.0 : collective->second));
    } else if (names[i].rfind("trainer", 0) == 0 && shape.data_feed) {
      lines.push_back(absl::StrFormat("%s: send %.2f s, receive %.2f s (its AsyncExecutor threads' RPC time)", who,
                                      OpSeconds(m, "send"), OpSeconds(m, "recv") + OpSeconds(m, "prefetch")));
    } else if (names[i].rfind("trainer", 0) == 0) {
      const double step = Sum(m, "oar_trainer_step_duration_seconds_sum");
      const double send = OpSeconds(m, "send");
      const double barrier = OpSeconds(m, "send_barrier") + OpSeconds(m, "fetch_barrier");
      const double receive = OpSeconds(m, "recv") + OpSeconds(m, "prefetch");
      lines.push_back(
          absl::StrFormat("%s: %.2f s of steps = compute %.2f s, send %.2f s, barrier wait %.2f s, receive %.2f s", who,
                          step, std::max(0.0, step - send - barrier - receive), send, barrier, receive));
    } else {
      lines.push_back(absl::StrFormat("%s: optimize %.2f s, serving %.2f s (handler threads' time)", who,
                                      Sum(m, "oar_pserver_optimize_duration_seconds_sum"),
                                      Sum(m, "oar_pserver_request_duration_seconds_sum")));
    }
  }
  return lines;
}

void PrintLaunchSummary(const LaunchShape& shape, const std::vector<TrainerReport>& reports, double first_step_seconds,
                        double wall, const std::vector<std::string>& names,
                        const std::vector<std::string>& metrics_files, const std::vector<std::string>& extra) {
  int64_t examples = 0;
  double train_seconds = 0, loss = 0;
  std::string accuracy = "n/a", test_loss = "n/a", auc;
  std::vector<std::string> unused;
  std::map<std::string, std::string> fetched;  // a program's --fetch metrics over the test data: test_<name>
  int index = 0, reported = 0;
  for (const auto& r : reports) {
    auto get = [&](const char* k) {
      auto it = r.result.find(k);
      return it == r.result.end() ? std::string() : it->second;
    };
    int64_t n = 0;
    double s = 0, l = 0;
    if (!absl::SimpleAtoi(get("examples"), &n)) n = r.examples;  // it died: what it reported
    (void)absl::SimpleAtod(get("seconds"), &s);
    (void)absl::SimpleAtod(get("loss"), &l);
    examples += n;
    train_seconds = std::max(train_seconds, s);
    if (!r.result.empty()) {  // an elastic job's trainer that died has none
      loss += l;
      ++reported;
    }
    if (!get("test_accuracy").empty()) accuracy = get("test_accuracy");
    if (!get("test_loss").empty()) test_loss = get("test_loss");
    if (!get("test_auc").empty()) auc = get("test_auc");
    for (const auto& [k, v] : r.result) {
      if (absl::StartsWith(k, "test_") && k != "test_loss" && k != "test_accuracy" && k != "test_auc") fetched[k] = v;
    }
    int64_t left = 0;
    if (absl::SimpleAtoi(get("unused"), &left) && left > 0) {
      unused.push_back(absl::StrCat(Shown(r.name.empty() ? absl::StrCat("trainer.", index) : r.name), ": ", left));
    }
    ++index;
  }
  loss /= std::max(reported, 1);
  // Trainers that report steps (not AsyncExecutor ones) say when the first came.
  const std::string first =
      first_step_seconds < 0 ? std::string() : absl::StrFormat(" (first step after %.1f s)", first_step_seconds);
  if (shape.nccl2) {
    // How the trainers all-reduced: every trainer joined the same backend.
    std::string over;
    for (const auto& r : reports) {
      auto it = r.result.find("collective");
      if (it != r.result.end() && !it->second.empty()) over = absl::StrCat(" over ", TransportWords(it->second));
    }
    std::printf("oar launch: nccl2, %d trainer(s)%s: done in %.1f s%s\n", shape.trainers, over.c_str(), wall,
                first.c_str());
  } else {
    std::printf("oar launch: %d pserver(s) x %d trainer(s), %s: done in %.1f s%s\n", shape.pservers, shape.trainers,
                shape.mode, wall, first.c_str());
  }
  if (!unused.empty()) {
    std::printf("  examples left unused so every trainer stopped at the same step: %s\n",
                absl::StrJoin(unused, ", ").c_str());
  }
  std::printf("  trained on %lld examples in %.1f s: %.0f examples/s across the trainers (this host has %u cores)\n",
              static_cast<long long>(examples), train_seconds, examples / std::max(train_seconds, 1e-9),
              std::thread::hardware_concurrency());
  std::printf("  last loss %.4f\n", loss);
  for (const std::string& line : TimeSplitLines(shape, names, metrics_files)) std::printf("  %s\n", line.c_str());
  for (const std::string& line : extra) std::printf("  %s\n", line.c_str());
  std::printf("test_loss=%s\n", test_loss.c_str());
  if (auc.empty() && shape.data_feed) {
    std::printf("test_auc=n/a (no --test_files)\n");
  } else if (auc.empty()) {
    std::printf("test_accuracy=%s\n", accuracy.c_str());
  } else {
    std::printf("test_auc=%s\n", auc.c_str());
  }
  for (const auto& [k, v] : fetched) std::printf("%s=%s\n", k.c_str(), v.c_str());
}

}  // namespace oar::cli
