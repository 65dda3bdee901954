// LaunchMonitor: what `oar launch` shows while its cluster runs. It takes
// every line the children write: the trainers' "@oar progress" and
// "@oar result" lines (cli/run_cmd.cc) feed one progress display — epoch,
// step, mean loss and examples/s across the trainers — and the summary;
// every other line is a log line, written with its child's name in front
// to stderr, or to <log_dir>/<child>.log when a log directory is given.
// The last lines of each child are kept to explain a failure. An elastic
// job's trainers come and go (AddChild, ChildGone); each "@oar progress"
// line is one step of the job, and its "@oar chunk" lines say which
// trainer trained which chunk (an elastic nccl2 job's "@oar ring" lines:
// which trainers formed each ring, from which step).
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
  std::string name;  // its process, "trainer.1"
  int trainer = 0;
  int epoch = 0, epochs = 0;
  int64_t step = 0, steps = 0, examples = 0;
  int64_t reported = 0;  // its progress lines: the steps it took part in with data
  double loss = 0;
  std::map<std::string, std::string> result;  // the "@oar result" fields, once it is done
  bool gone = false;                          // it ended without a result
};

// "@oar chunk trainer=2 epoch=1 chunk=5 examples=1875" from process `child`.
struct ChunkDone {
  size_t child;
  int epoch = 0;
  int64_t chunk = 0, examples = 0;
};

// "@oar ring trainer=0 ring=3 rank=0 size=2 trainers=0,2 step=40 epoch=1
// offset=5120" (an elastic nccl2 job's ring; each of its trainers says it).
struct RingFormed {
  int64_t ring = 0;
  int size = 0;
  std::string trainers;
  int64_t step = 0, epoch = 0, offset = 0;
};

class LaunchMonitor {
 public:
  // names[i] is child i ("pserver.0"); trainer_of[i] its trainer id or -1.
  LaunchMonitor(std::vector<std::string> names, std::vector<int> trainer_of, std::string log_dir);
  absl::Status OpenLogs();

  void OnLine(size_t child, const std::string& line, bool from_stdout);
  // A process started after the others (index: the next), and one that
  // ended (an elastic job's trainer that died: not in the display).
  absl::Status AddChild(const std::string& name, int trainer);
  void ChildGone(size_t child);
  // Redraws the progress line (at most a few times a second on a terminal).
  void Tick();
  // Ends the progress line before a summary or an error.
  void Finish();

  // The last log lines of a child, oldest first.
  std::vector<std::string> Tail(size_t child) const;
  // The trainer processes' reports, in the order they started.
  std::vector<TrainerReport> Trainers() const;
  std::vector<ChunkDone> Chunks() const;
  // An elastic nccl2 job's rings, in order.
  std::vector<RingFormed> Rings() const;
  // Steps reported by every trainer process so far (an async job's
  // updates).
  int64_t JobSteps() const;
  // Whether trainer process `child` has reported a step.
  bool HasStepped(size_t child) const;
  // Seconds from the monitor's start to the first step any trainer
  // reported (-1 before that).
  double FirstStepSeconds() const;

 private:
  void DrawLocked(bool final) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ClearLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Status OpenLogLocked(size_t child) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string log_dir_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();

  mutable absl::Mutex mu_;
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  std::vector<int> trainer_of_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<std::FILE>> logs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::deque<std::string>> tails_ ABSL_GUARDED_BY(mu_);
  std::vector<TrainerReport> reports_ ABSL_GUARDED_BY(mu_);  // per child; trainers' only used
  std::vector<ChunkDone> chunks_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, RingFormed> rings_ ABSL_GUARDED_BY(mu_);
  int64_t job_steps_ ABSL_GUARDED_BY(mu_) = 0;
  double first_step_ ABSL_GUARDED_BY(mu_) = -1;  // seconds from start_ to the first and last step reported
  double last_step_ ABSL_GUARDED_BY(mu_) = -1;
  bool drawn_ ABSL_GUARDED_BY(mu_) = false;
  int last_decile_ ABSL_GUARDED_BY(mu_) = -1;
  std::chrono::steady_clock::time_point last_draw_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oar::cli
