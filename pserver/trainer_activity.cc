#include "pserver/trainer_activity.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "glog/logging.h"
#include "pserver/pserver_metrics.h"

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

absl::StatusOr<bool> TrainerActivity::UpdateMembers(absl::Time now, absl::Duration idle, std::vector<int>* silent) {
  const TrainerMembers seen = members_fn_();
  std::set<int> members, ever;
  for (int t : seen.live) {
    if (t >= 0 && t < fanin_) members.insert(t);
  }
  for (int t : seen.ever) {
    if (t >= 0 && t < fanin_) ever.insert(t);
  }
  ever.insert(members.begin(), members.end());
  absl::MutexLock l(&mu_);
  for (const auto& [t, value] : seen.values) {
    if (members.count(t) == 0) continue;
    auto was = value_.find(t);
    if (was != value_.end() && was->second != value && left_.count(t) == 0 && completed_.count(t) == 0) {
      LOG(WARNING) << "trainer " << t << " left the job without completing (its process, " << was->second
                   << ", was replaced by " << value << ")";
      GetPserverMetrics().trainer_leaves->Add();
      left_.insert(t);  // and joins again below
    }
    value_[t] = value;
  }
  for (int t : ever) {
    if (ever_.insert(t).second || (members.count(t) != 0 && left_.erase(t) > 0)) {
      LOG(INFO) << "trainer " << t << " joined the job";
      GetPserverMetrics().trainer_joins->Add();
      last_[static_cast<size_t>(t)] = now;  // its idle bound starts now
    }
  }
  for (int t : ever_) {
    if (members.count(t) == 0 && completed_.count(t) == 0 && left_.insert(t).second) {
      LOG(WARNING) << "trainer " << t << " left the job without completing (its lease in etcd expired or was revoked)";
      GetPserverMetrics().trainer_leaves->Add();
    }
  }
  bool all = !completed_.empty();
  for (int t : ever_) {
    if (completed_.count(t) != 0 || left_.count(t) != 0) continue;
    all = false;
    // A member alive in etcd yet silent for twice the bound is stuck (a
    // dead one's lease, of the bound's length, ran out before).
    if (now - last_[static_cast<size_t>(t)] > 2 * idle) silent->push_back(t);
  }
  if (all) return true;
  std::set<int> active = completed_;
  active.insert(members.begin(), members.end());
  const std::string need = absl::StrCat(" it needs (--trainers ", seen.min, ":", fanin_, ")");
  if (static_cast<int>(active.size()) >= seen.min) {
    had_min_ = true;
    below_min_since_ = absl::InfiniteFuture();
  } else if (below_min_since_ == absl::InfiniteFuture()) {
    below_min_since_ = now;
    if (had_min_) {
      LOG(WARNING) << "the job has " << active.size() << " trainer(s) left, fewer than the " << seen.min << need
                   << "; waiting up to " << absl::FormatDuration(idle) << " for more to join";
    }
  } else if (now - below_min_since_ > idle) {
    return absl::UnavailableError(absl::StrCat(
        had_min_ ? "the job was left with " : "only ", active.size(), " trainer(s) ", had_min_ ? "for " : "joined in ",
        absl::FormatDuration(idle), ", fewer than the ", seen.min, need, "; start more trainers, or lower MIN"));
  }
  return false;
}

absl::Status TrainerActivity::AwaitAllCompleted(absl::Duration idle, const std::function<bool()>& stop) {
  while (true) {
    if (stop()) return absl::OkStatus();
    std::vector<int> silent;
    if (members_fn_) {
      OAR_ASSIGN_OR_RETURN(const bool done, UpdateMembers(absl::Now(), idle, &silent));
      if (done) return absl::OkStatus();
      if (silent.empty()) {
        absl::MutexLock l(&mu_);
        const uint64_t seen = wakes_;
        auto woken = [this, seen]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return wakes_ != seen; };
        mu_.AwaitWithTimeout(absl::Condition(
                                 +[](decltype(woken)* w) { return (*w)(); }, &woken),
                             absl::Milliseconds(100));
        continue;
      }
    } else {
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
