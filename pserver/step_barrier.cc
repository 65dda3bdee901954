#include "pserver/step_barrier.h"

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oar {

absl::Status StepBarrier::CheckTrainer(int trainer_id) const {
  if (trainer_id < 0 || trainer_id >= fanin_) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer_id ", trainer_id, " is not in [0, ", fanin_, ") (this pserver's Fanin)"));
  }
  return absl::OkStatus();
}

absl::Status StepBarrier::AwaitLocked(const std::function<bool()>& cond, const std::string& what,
                                      absl::Duration limit) {
  struct Wait {
    const std::function<bool()>* cond;
    const absl::Status* ended;
  } w{&cond, &ended_};
  const bool met = mu_.AwaitWithDeadline(absl::Condition(
                                             +[](Wait* w) { return !w->ended->ok() || (*w->cond)(); }, &w),
                                         absl::Now() + limit);
  if (!ended_.ok()) return ended_;
  if (!met) return absl::DeadlineExceededError(absl::StrCat(what, ": waited ", absl::FormatDuration(limit)));
  return absl::OkStatus();
}

absl::Status StepBarrier::AwaitNotOptimizing(const std::string& what) {
  return AwaitLocked([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return phase_ != Phase::kOptimize; }, what, timeout_);
}

namespace {

absl::Status FromAnEarlierRun(const char* what, int trainer_id) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, " from an earlier run of trainer ", trainer_id,
                   ", which has restarted since (or two trainers run with PADDLE_TRAINER_ID=", trainer_id, ")"));
}

}  // namespace

absl::Status StepBarrier::BeginReceive(int trainer_id, uint64_t incarnation) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = CheckTrainer(trainer_id); !s.ok()) return s;
  if (absl::Status s = CheckMemberLocked(trainer_id, "a gradient"); !s.ok()) return s;
  if (absl::Status s = AwaitNotOptimizing(absl::StrCat("gradient from trainer ", trainer_id)); !s.ok()) return s;
  if (absl::Status s = CheckMemberLocked(trainer_id, "a gradient"); !s.ok()) return s;  // it may have left meanwhile
  if (StoredLocked(trainer_id, incarnation) == nullptr) return FromAnEarlierRun("a gradient", trainer_id);
  HeardLocked(trainer_id);
  ++receiving_;
  return absl::OkStatus();
}

int64_t* StepBarrier::StoredLocked(int trainer_id, uint64_t incarnation) {
  Stored& s = stored_[trainer_id];
  switch (s.run.Observe(incarnation)) {
    case TrainerRun::Seen::kLatest:
      return &s.count;
    case TrainerRun::Seen::kReplaced:
      return nullptr;
    case TrainerRun::Seen::kNew:  // restarted: what the old run stored is not this one's
      s.count = 0;
      return &s.count;
  }
  return nullptr;
}

void StepBarrier::EndReceive(int trainer_id, bool stored, uint64_t incarnation) {
  absl::MutexLock l(&mu_);
  --receiving_;
  int64_t* count = StoredLocked(trainer_id, incarnation);
  if (stored && count != nullptr) ++*count;
  HeardLocked(trainer_id);
}

absl::Status StepBarrier::BatchBarrier(int trainer_id, int64_t sent, uint64_t incarnation) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = CheckTrainer(trainer_id); !s.ok()) return s;
  if (absl::Status s = CheckMemberLocked(trainer_id, "BATCH_BARRIER"); !s.ok()) return s;
  if (absl::Status s = AwaitNotOptimizing("BATCH_BARRIER"); !s.ok()) return s;
  if (absl::Status s = CheckMemberLocked(trainer_id, "BATCH_BARRIER"); !s.ok()) return s;
  int64_t* stored = StoredLocked(trainer_id, incarnation);
  if (stored == nullptr) return FromAnEarlierRun("BATCH_BARRIER", trainer_id);
  if (sent > 0 && *stored < sent) {
    return absl::UnavailableError(absl::StrCat("BATCH_BARRIER from trainer ", trainer_id, " came before ",
                                               sent - *stored, " of the ", sent,
                                               " variable(s) it sent since its last barrier"));
  }
  batch_.insert(trainer_id);
  HeardLocked(trainer_id);
  if (elastic_) {
    batch_at_ = heard_[trainer_id];
    stepped_.insert(trainer_id);
  }
  if (elastic_ && sent == 0) idle_.insert(trainer_id);  // it sent nothing this step: it waits for data
  *stored = 0;
  return absl::OkStatus();
}

absl::Status StepBarrier::FetchBarrier(int trainer_id, uint64_t incarnation) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = CheckTrainer(trainer_id); !s.ok()) return s;
  if (absl::Status s = CheckMemberLocked(trainer_id, "FETCH_BARRIER"); !s.ok()) return s;
  if (StoredLocked(trainer_id, incarnation) == nullptr) return FromAnEarlierRun("FETCH_BARRIER", trainer_id);
  // Like a Get, it belongs to the serve phase after the optimize that
  // consumes the trainer's own pending BATCH_BARRIER (after a resync the
  // replayed step's barrier can be pending while an earlier serve phase is
  // still open: counting the FETCH_BARRIER there would let the trainer start
  // its next step before its replayed one was applied).
  auto ready = [this, trainer_id]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return GetReadyLocked(trainer_id); };
  if (absl::Status s = AwaitLocked(ready, "FETCH_BARRIER", Verdict() * timeout_); !s.ok()) return s;
  if (absl::Status s = CheckMemberLocked(trainer_id, "FETCH_BARRIER"); !s.ok()) return s;
  // The trainer may have restarted while this waited.
  if (StoredLocked(trainer_id, incarnation) == nullptr) return FromAnEarlierRun("FETCH_BARRIER", trainer_id);
  fetch_.insert(trainer_id);
  HeardLocked(trainer_id);
  if (elastic_) fetch_at_ = heard_[trainer_id];
  return absl::OkStatus();
}

absl::Status StepBarrier::BeforeGet(int trainer_id) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = CheckTrainer(trainer_id); !s.ok()) return s;
  if (absl::Status s = CheckMemberLocked(trainer_id, "a Get"); !s.ok()) return s;
  HeardLocked(trainer_id);
  auto ready = [this, trainer_id]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return GetReadyLocked(trainer_id); };
  if (absl::Status s = AwaitLocked(ready, absl::StrCat("Get from trainer ", trainer_id), Verdict() * timeout_);
      !s.ok()) {
    return s;
  }
  return CheckMemberLocked(trainer_id, "a Get");
}

void StepBarrier::WhenGetReady(int trainer_id, GetReady serve) {
  absl::Status now;
  {
    absl::MutexLock l(&mu_);
    now = CheckTrainer(trainer_id);
    if (now.ok()) now = CheckMemberLocked(trainer_id, "a Get");
    if (now.ok()) now = ended_;
    if (now.ok()) HeardLocked(trainer_id);
    if (now.ok() && !GetReadyLocked(trainer_id)) {
      parked_.emplace_back(trainer_id, std::move(serve));
      return;
    }
  }
  serve(now);
}

void StepBarrier::RunParked(std::vector<std::pair<int, GetReady>>& parked, const absl::Status& s) {
  for (auto& [trainer, serve] : parked) serve(s);
}

void StepBarrier::End(const absl::Status& why) {
  std::vector<std::pair<int, GetReady>> parked;
  absl::Status reason;
  {
    absl::MutexLock l(&mu_);
    if (ended_.ok()) ended_ = why;  // the first reason stays
    reason = ended_;
    parked.swap(parked_);
  }
  RunParked(parked, reason);
}

void StepBarrier::AdmitFetched(int trainer_id) {
  absl::MutexLock l(&mu_);
  if (CheckTrainer(trainer_id).ok() && phase_ == Phase::kServe) fetch_.insert(trainer_id);
}

absl::Status StepBarrier::Complete(int trainer_id, uint64_t incarnation) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = CheckTrainer(trainer_id); !s.ok()) return s;
  if (StoredLocked(trainer_id, incarnation) == nullptr) return FromAnEarlierRun("COMPLETE", trainer_id);
  if (elastic_ && (left_.count(trainer_id) || departing_.count(trainer_id))) {
    return CheckMemberLocked(trainer_id, "COMPLETE");
  }
  completed_.insert(trainer_id);
  holds_.erase(trainer_id);
  ++events_;
  return absl::OkStatus();
}

absl::StatusOr<bool> StepBarrier::AwaitPhaseEnd() {
  absl::MutexLock l(&mu_);
  if (elastic_) return AwaitPhaseEndElastic();
  const bool serving = phase_ == Phase::kServe;
  std::set<int>& arrived = serving ? fetch_ : batch_;
  auto all_in = [this, &arrived, serving]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (int t = 0; t < fanin_; ++t) {
      if (!arrived.count(t) && !completed_.count(t)) return false;
    }
    return serving || receiving_ == 0;
  };
  absl::Status s = AwaitLocked(all_in, "", timeout_);
  if (absl::IsDeadlineExceeded(s)) {
    std::vector<int> missing;
    for (int t = 0; t < fanin_; ++t) {
      if (!arrived.count(t) && !completed_.count(t)) missing.push_back(t);
    }
    return absl::DeadlineExceededError(absl::StrCat(serving ? "FETCH_BARRIER" : "BATCH_BARRIER", " of step ", step_,
                                                    " timed out after ", absl::FormatDuration(timeout_),
                                                    ": trainer(s) ", absl::StrJoin(missing, ", "),
                                                    " never arrived (FLAGS_rpc_deadline; a trainer died or is stuck)"));
  }
  if (!s.ok()) return s;
  if (static_cast<int>(completed_.size()) == fanin_) return false;
  EndPhaseLocked();
  return true;
}

void StepBarrier::EndPhaseLocked() {
  if (phase_ == Phase::kServe) {
    fetch_.clear();
    phase_ = Phase::kRecv;
    return;
  }
  phase_ = Phase::kOptimize;
  completed_at_optimize_ = completed_;
  if (!elastic_) return;
  contributors_.clear();
  for (int t : batch_) {
    if (!idle_.count(t)) contributors_.insert(t);
  }
}

void StepBarrier::OptimizeDone() {
  std::vector<std::pair<int, GetReady>> ready;
  {
    absl::MutexLock l(&mu_);
    batch_.clear();
    phase_ = Phase::kServe;
    ++step_;
    if (elastic_) {
      last_contributors_ = std::move(contributors_);
      contributors_.clear();
      idle_.clear();
      for (int t : leave_after_step_) left_.insert(t);
      leave_after_step_.clear();
    }
    ready.swap(parked_);  // every Get is servable now: kServe, no BATCH_BARRIER pending
  }
  RunParked(ready, absl::OkStatus());
}

void StepBarrier::Stop() { End(absl::CancelledError("the pserver is shutting down")); }

StepBarrier::Phase StepBarrier::phase() const {
  absl::MutexLock l(&mu_);
  return phase_;
}

int StepBarrier::step() const {
  absl::MutexLock l(&mu_);
  return step_;
}

std::set<int> StepBarrier::completed() const {
  absl::MutexLock l(&mu_);
  return completed_;
}

std::set<int> StepBarrier::completed_at_optimize() const {
  absl::MutexLock l(&mu_);
  return completed_at_optimize_;
}

}  // namespace oar
