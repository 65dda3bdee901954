// LaunchMonitor: what `oar launch` shows while its cluster runs. It takes
// every line the children write: the trainers' "@oar progress" and
// "@oar result" lines (cli/run_cmd.cc) feed one progress display — epoch,
// step, mean loss and examples/s across the trainers — and the summary;
// every other line is a log line, written with its child's name in front
// to stderr, or to <log_dir>/<child>.log when a log directory is given.
// The last lines of each child are kept to explain a failure.
//
// Thread-safety: OnLine runs on the process group's reader thread, the
// other methods on the launcher's; a mutex guards the state.
#pragma once

#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace oar::cli {

struct TrainerReport {
  int epoch = 0, epochs = 0;
  int64_t step = 0, steps = 0, examples = 0;
  double loss = 0;
  std::map<std::string, std::string> result;  // the "@oar result" fields, once it is done
};

class LaunchMonitor {
 public:
  // names[i] is child i ("pserver.0"); trainer_of[i] its trainer id or -1.
  LaunchMonitor(std::vector<std::string> names, std::vector<int> trainer_of, std::string log_dir);
  absl::Status OpenLogs();

  void OnLine(size_t child, const std::string& line, bool from_stdout);
  // Redraws the progress line (at most a few times a second on a terminal).
  void Tick();
  // Ends the progress line before a summary or an error.
  void Finish();

  // The last log lines of a child, oldest first.
  std::vector<std::string> Tail(size_t child) const;
  std::vector<TrainerReport> Trainers() const;
  // Seconds from the monitor's start to the first step any trainer
  // reported (-1 before that).
  double FirstStepSeconds() const;

 private:
  void DrawLocked(bool final) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ClearLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<std::string> names_;
  const std::vector<int> trainer_of_;
  const std::string log_dir_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();

  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<std::FILE>> logs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::deque<std::string>> tails_ ABSL_GUARDED_BY(mu_);
  std::vector<TrainerReport> trainers_ ABSL_GUARDED_BY(mu_);
  double first_step_ ABSL_GUARDED_BY(mu_) = -1;  // seconds from start_ to the first and last step reported
  double last_step_ ABSL_GUARDED_BY(mu_) = -1;
  bool drawn_ ABSL_GUARDED_BY(mu_) = false;
  int last_decile_ ABSL_GUARDED_BY(mu_) = -1;
  std::chrono::steady_clock::time_point last_draw_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oar::cli
