// Communicator's half-async rounds (Fluid 1.7+'s HalfAsyncCommunicator):
// the training threads meet at Barrier(), the send thread runs one round
// of merged sends and a pull for them, installs the pull while they wait,
// and releases them. See communicator.h.
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "trainer/communicator.h"

namespace oar {

void Communicator::SetThreads(int threads) {
  absl::MutexLock lock(&mu_);
  threads_ = threads;
}

void Communicator::ThreadDone() {
  absl::MutexLock lock(&mu_);
  if (threads_ > 0) --threads_;
}

bool Communicator::RoundDue() const { return (arrived_ > 0 && arrived_ >= threads_) || stopping_ || !error_.ok(); }

absl::Status Communicator::Barrier() {
  if (!options_.half_async) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  OAR_RETURN_IF_ERROR(error_);
  const int64_t round = rounds_;
  ++arrived_;
  auto released = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return rounds_ > round || !error_.ok() || stopping_; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&released), options_.queue_wait)) {
    return absl::DeadlineExceededError(absl::StrCat("half-async barrier: ", arrived_, " of ", threads_,
                                                    " training threads arrived in ",
                                                    absl::FormatDuration(options_.queue_wait)));
  }
  return error_;
}

// One round per meeting of the threads: what they queued, merged by mean
// (Fluid's HalfAsyncCommunicator averages), sent; the parameters pulled and,
// while the threads are parked, installed; then they go on.
void Communicator::HalfAsyncLoop() {
  while (true) {
    std::vector<std::string> ready;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &Communicator::RoundDue));
      if (!error_.ok()) break;
      for (const auto& [name, q] : queues_) {
        if (!q.values.empty()) ready.push_back(name);
      }
      if (stopping_ && ready.empty() && arrived_ == 0) break;
    }
    SendRound(ready);
    absl::Status s = contexts_.recv.empty() ? absl::OkStatus() : PullAll();
    if (s.ok() && params_ != nullptr) s = InstallReceived(params_);
    if (!s.ok()) Fail(s);
    absl::MutexLock lock(&mu_);
    arrived_ = 0;
    ++rounds_;
    if (stopping_) {
      bool left = false;
      for (const auto& [name, q] : queues_) left = left || !q.values.empty();
      if (!left) break;
    }
  }
}

}  // namespace oar
