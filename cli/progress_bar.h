// ProgressBar: one line per epoch on a terminal, redrawn in place
// ("epoch 1/2 [=====>    ] 234/469  12345 ex/s  loss 0.4321"); where the
// output is not a terminal, a line every tenth of the epoch instead.
//
// Thread-safety: externally synchronized.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace oar::cli {

class ProgressBar {
 public:
  // total_steps <= 0: not known (a streamed source); the bar then counts.
  ProgressBar(std::FILE* out, std::string title, int64_t total_steps);
  // Records one finished step of `examples` examples with the running loss.
  void Step(int64_t examples, double loss);
  // Draws the final state and ends the line.
  void Finish();
  double seconds() const;
  double examples_per_second() const;

 private:
  void Draw(bool final);

  std::FILE* out_;
  std::string title_;
  int64_t total_;
  bool known_;
  int64_t steps_ = 0;
  int64_t examples_ = 0;
  double loss_ = 0;
  bool tty_;
  int64_t last_report_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

// --step_log: each step's loss on its own line, at full float precision,
// flushed as it goes (the end-to-end tests compare runs step by step).
class StepLog {
 public:
  // A log that writes nothing when `path` is empty.
  static absl::StatusOr<StepLog> Open(const std::string& path);
  void Add(double loss);

 private:
  std::shared_ptr<std::FILE> file_;
};

}  // namespace oar::cli
