#include "pserver/early_blocks.h"

#include <utility>

namespace oar {

bool EarlyBlocks::TryStart(int block, absl::FunctionRef<bool()> eligible, std::function<absl::Status()> run) {
  absl::MutexLock l(&mu_);
  if (holding_ > 0 || started_.count(block) || !eligible()) return false;
  started_.insert(block);
  ++running_;
  pool_->Schedule([this, run = std::move(run)] {
    absl::Status s = run();
    absl::MutexLock l(&mu_);
    error_.Update(s);
    --running_;
  });
  return true;
}

absl::StatusOr<std::set<int>> EarlyBlocks::Join() {
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &running_));
  if (!error_.ok()) return error_;
  return started_;
}

void EarlyBlocks::EndStep() {
  absl::MutexLock l(&mu_);
  started_.clear();
}

absl::Status EarlyBlocks::Hold(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  ++holding_;
  auto at_boundary =
      +[](EarlyBlocks* e) ABSL_NO_THREAD_SAFETY_ANALYSIS { return e->running_ == 0 && e->started_.empty(); };
  if (mu_.AwaitWithTimeout(absl::Condition(at_boundary, this), timeout)) return absl::OkStatus();
  --holding_;
  return absl::DeadlineExceededError("a checkpoint waited for the step in progress to end");
}

void EarlyBlocks::Resume() {
  absl::MutexLock l(&mu_);
  --holding_;
}

}  // namespace oar
