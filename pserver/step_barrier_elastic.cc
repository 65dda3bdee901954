// StepBarrier in an elastic job (step_barrier.h): the JOIN handshake
// (Hold, Join), departures (Depart, then Resolve once the pservers agreed
// on the trainer's last step) and the loop's wait, which counts the joined
// trainers rather than 0..fanin-1 and ends the job once every trainer that
// joined (and every member of the job) has completed or left.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc/rpc_common.h"
#include "glog/logging.h"
#include "pserver/step_barrier.h"

namespace oar {

bool StepBarrier::LiveLocked(int t) const {
  if (completed_.count(t)) return false;
  if (!elastic_) return true;
  auto e = joined_.find(t);
  return e != joined_.end() && e->second.entry <= step_ && !left_.count(t);
}

absl::Status StepBarrier::CheckMemberLocked(int trainer_id, const char* what) const {
  if (!elastic_) return absl::OkStatus();
  if (left_.count(trainer_id) || departing_.count(trainer_id)) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " from trainer ", trainer_id, ", ", rpc::kLeftTheJob,
                     " (its lease in etcd ran out: it was cut off from etcd, or too slow to renew it)"));
  }
  if (!joined_.count(trainer_id)) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " from trainer ", trainer_id, ", which has not joined the job's steps (JOIN@RECV first)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> StepBarrier::Hold(int trainer_id) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = CheckTrainer(trainer_id); !s.ok()) return s;
  if (!elastic_) return absl::FailedPreconditionError("JOIN_HOLD@RECV: this pserver's job is not elastic");
  if (!ended_.ok()) return ended_;
  if (departing_.count(trainer_id)) {
    return absl::UnavailableError(
        absl::StrCat("trainer ", trainer_id, "'s earlier run is still leaving the job; try again"));
  }
  holds_[trainer_id] = absl::Now();
  ++events_;
  return phase_ == Phase::kServe ? step_ : step_ + 1;
}

absl::Status StepBarrier::Join(int trainer_id, int entry_step, const std::string& member) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = CheckTrainer(trainer_id); !s.ok()) return s;
  if (!elastic_) return absl::FailedPreconditionError("JOIN@RECV: this pserver's job is not elastic");
  if (auto e = joined_.find(trainer_id);
      e != joined_.end() && e->second.entry == entry_step && !left_.count(trainer_id) && e->second.member == member) {
    return absl::OkStatus();  // said again
  }
  bool earlier_run_in = joined_.count(trainer_id) && !left_.count(trainer_id) && !completed_.count(trainer_id);
  if (earlier_run_in && joined_[trainer_id].member == member) {
    // The same process joining again (another pserver refused its step):
    // fine while it has not begun at the step it joined before.
    const int was = joined_[trainer_id].entry;
    earlier_run_in = step_ > was || (step_ == was && (phase_ != Phase::kServe || fetch_.count(trainer_id)));
  }
  if (departing_.count(trainer_id) || earlier_run_in) {
    return absl::UnavailableError(
        absl::StrCat("trainer ", trainer_id, "'s earlier run is still leaving the job; try again"));
  }
  holds_.erase(trainer_id);
  ++events_;
  if (step_ > entry_step || (step_ == entry_step && phase_ != Phase::kServe)) {
    return absl::FailedPreconditionError(absl::StrCat("trainer ", trainer_id, " asked to join at step ", entry_step,
                                                      ", which this pserver has begun to collect (it is at step ",
                                                      step_, "): hold again"));
  }
  joined_[trainer_id] = Joined{entry_step, member, absl::Now()};
  stepped_.erase(trainer_id);  // starting again: its first step may come after a long setup
  left_.erase(trainer_id);
  completed_.erase(trainer_id);
  return absl::OkStatus();
}

std::map<int, StepBarrier::Joined> StepBarrier::joined() const {
  absl::MutexLock l(&mu_);
  std::map<int, Joined> out;
  for (const auto& [t, j] : joined_) {
    if (!completed_.count(t) && !left_.count(t) && !departing_.count(t) && !leave_after_step_.count(t)) out[t] = j;
  }
  return out;
}

void StepBarrier::SetMembers(std::set<int> members) {
  absl::MutexLock l(&mu_);
  if (members != members_) ++events_;
  members_ = std::move(members);
}

std::optional<StepBarrier::Departure> StepBarrier::Depart(int trainer_id) {
  absl::MutexLock l(&mu_);
  holds_.erase(trainer_id);
  auto e = joined_.find(trainer_id);
  if (e == joined_.end() || left_.count(trainer_id) || completed_.count(trainer_id)) return std::nullopt;
  departing_.insert(trainer_id);
  ++events_;
  Departure d;
  d.entry = e->second.entry;
  d.step = step_;
  d.contributed = batch_.count(trainer_id) > 0 && idle_.count(trainer_id) == 0;
  d.contributed_before = last_contributors_.count(trainer_id) > 0;
  return d;
}

void StepBarrier::Resolve(int trainer_id, int last_step) {
  absl::MutexLock l(&mu_);
  departing_.erase(trainer_id);
  ++events_;
  if (last_step < step_) {
    left_.insert(trainer_id);
    batch_.erase(trainer_id);
    fetch_.erase(trainer_id);
    return;
  }
  // Its gradients of this step reached every pserver (it sends them all
  // before its first BATCH_BARRIER), and another pserver has its barrier.
  if (phase_ != Phase::kOptimize) {
    batch_.insert(trainer_id);
    idle_.erase(trainer_id);
    fetch_.insert(trainer_id);
  }
  leave_after_step_.insert(trainer_id);
}

bool StepBarrier::HasLeft(int trainer_id) const {
  absl::MutexLock l(&mu_);
  return elastic_ && (left_.count(trainer_id) || departing_.count(trainer_id) || leave_after_step_.count(trainer_id));
}

std::map<int, absl::Duration> StepBarrier::Silent(absl::Time now) const {
  absl::MutexLock l(&mu_);
  std::map<int, absl::Duration> out;
  if (!elastic_ || phase_ == Phase::kOptimize || !ended_.ok()) return out;
  const bool serving = phase_ == Phase::kServe;
  const std::set<int>& arrived = serving ? fetch_ : batch_;
  bool someone = false;
  for (int t : arrived) someone |= LiveLocked(t);
  if (!someone) return out;
  for (int t = 0; t < fanin_; ++t) {
    if (!LiveLocked(t) || !stepped_.count(t) || arrived.count(t) || departing_.count(t) || leave_after_step_.count(t)) {
      continue;
    }
    absl::Time since = std::max(serving ? fetch_at_ : batch_at_, joined_.at(t).at);
    if (auto h = heard_.find(t); h != heard_.end()) since = std::max(since, h->second);
    if (now - since >= timeout_) out[t] = now - since;
  }
  return out;
}

std::set<int> StepBarrier::contributors_at_optimize() const {
  absl::MutexLock l(&mu_);
  if (!elastic_) {
    std::set<int> all;
    for (int t = 0; t < fanin_; ++t) {
      if (!completed_at_optimize_.count(t)) all.insert(t);
    }
    return all;
  }
  return contributors_;
}

std::set<int> StepBarrier::live() const {
  absl::MutexLock l(&mu_);
  std::set<int> out;
  for (const auto& [t, joined] : joined_) {
    if (LiveLocked(t)) out.insert(t);
  }
  return out;
}

int StepBarrier::InPlayLocked() const {
  std::set<int> in = completed_;
  for (const auto& [t, j] : joined_) {
    if (!left_.count(t)) in.insert(t);
  }
  return static_cast<int>(in.size());
}

bool StepBarrier::DoneLocked() const {
  if (completed_.empty() || !holds_.empty() || !departing_.empty() || !leave_after_step_.empty()) return false;
  for (const auto& [t, j] : joined_) {
    if (!completed_.count(t) && !left_.count(t)) return false;
  }
  for (int t : members_) {  // a member yet to join
    if (!completed_.count(t) && !left_.count(t) && !joined_.count(t)) return false;
  }
  return true;
}

absl::StatusOr<bool> StepBarrier::AwaitPhaseEndElastic() {
  const bool serving = phase_ == Phase::kServe;
  const std::set<int>& arrived = serving ? fetch_ : batch_;
  auto all_in = [this, &arrived, serving]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (InPlayLocked() < min_trainers_) return false;
    if (serving ? !holds_.empty() : receiving_ != 0) return false;
    bool anyone = false;  // a step with nobody in it or joining waits (for a joiner, or the job's end)
    for (const auto& [t, j] : joined_) anyone |= !completed_.count(t) && !left_.count(t);
    for (int t = 0; t < fanin_; ++t) {
      if (LiveLocked(t) && !arrived.count(t)) return false;
    }
    return anyone;
  };
  int64_t seen = events_;
  absl::Time changed = absl::Now(), below_since = absl::InfiniteFuture();
  const absl::Duration patience = 2 * timeout_;  // a lease running out, then the pservers' agreement
  while (true) {
    if (!ended_.ok()) return ended_;
    if (DoneLocked()) return false;
    const absl::Time now = absl::Now();
    for (auto h = holds_.begin(); h != holds_.end();) {  // a joiner that never came back
      if (now - h->second <= timeout_) {
        ++h;
        continue;
      }
      LOG(WARNING) << "trainer " << h->first << " held step " << step_ << " for " << absl::FormatDuration(timeout_)
                   << " without joining; going on without it";
      h = holds_.erase(h);
    }
    if (events_ != seen) {
      seen = events_;
      changed = now;
    }
    const int in_play = InPlayLocked();
    if (in_play >= min_trainers_) {
      had_min_ = true;
      below_since = absl::InfiniteFuture();
    } else if (below_since == absl::InfiniteFuture()) {
      below_since = now;
    }
    if (all_in()) break;
    if (now - below_since > timeout_) {
      const std::string need = absl::StrCat(" it needs (--trainers ", min_trainers_, ":", fanin_, ")");
      return absl::UnavailableError(absl::StrCat(had_min_ ? "the job was left with " : "only ", in_play, " trainer(s) ",
                                                 had_min_ ? "for " : "joined in ", absl::FormatDuration(timeout_),
                                                 ", fewer than the ", min_trainers_, need,
                                                 "; start more trainers, or lower MIN"));
    }
    if (now - changed > patience) {
      std::vector<int> missing;
      for (int t = 0; t < fanin_; ++t) {
        if (LiveLocked(t) && !arrived.count(t)) missing.push_back(t);
      }
      return absl::DeadlineExceededError(absl::StrCat(
          serving ? "FETCH_BARRIER" : "BATCH_BARRIER", " of step ", step_, " timed out after ",
          absl::FormatDuration(patience), ": trainer(s) ", absl::StrJoin(missing, ", "),
          " never arrived while their leases in etcd stayed alive (FLAGS_rpc_deadline; a trainer is stuck)"));
    }
    (void)AwaitLocked([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return all_in() || DoneLocked(); }, "",
                      absl::Milliseconds(100));
  }
  EndPhaseLocked();
  return true;
}

}  // namespace oar
