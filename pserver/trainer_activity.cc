#include "pserver/trainer_activity.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oar {

TrainerActivity::TrainerActivity(int fanin) : fanin_(fanin), last_(static_cast<size_t>(fanin), absl::Now()) {}

void TrainerActivity::Heard(int trainer) {
  absl::MutexLock l(&mu_);
  last_[static_cast<size_t>(trainer)] = absl::Now();
}

bool TrainerActivity::Complete(int trainer) {
  absl::MutexLock l(&mu_);
  return completed_.insert(trainer).second;
}

bool TrainerActivity::completed(int trainer) const {
  absl::MutexLock l(&mu_);
  return completed_.count(trainer) > 0;
}

std::set<int> TrainerActivity::completed() const {
  absl::MutexLock l(&mu_);
  return completed_;
}

void TrainerActivity::Wake() {
  absl::MutexLock l(&mu_);
  ++wakes_;
}

absl::Status TrainerActivity::AwaitAllCompleted(absl::Duration idle, const std::function<bool()>& stop) {
  while (true) {
    if (stop()) return absl::OkStatus();
    std::vector<int> silent;
    {
      absl::MutexLock l(&mu_);
      const uint64_t seen = wakes_;
      auto settled = [this, seen]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return static_cast<int>(completed_.size()) == fanin_ || wakes_ != seen;
      };
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](decltype(settled)* s) { return (*s)(); }, &settled),
                           absl::Milliseconds(100));
      if (static_cast<int>(completed_.size()) == fanin_) return absl::OkStatus();
      const absl::Time now = absl::Now();
      for (int t = 0; t < fanin_; ++t) {
        if (!completed_.count(t) && now - last_[static_cast<size_t>(t)] > idle) silent.push_back(t);
      }
    }
    if (!silent.empty() && !stop()) {
      return absl::DeadlineExceededError(absl::StrCat("trainer(s) ", absl::StrJoin(silent, ", "), " sent nothing for ",
                                                      absl::FormatDuration(idle),
                                                      " and never completed (FLAGS_rpc_deadline; died or stuck?)"));
    }
  }
}

}  // namespace oar
