// ParameterServer's sync step: the loop over StepBarrier's phases and the
// optimize blocks of each step. A block runs as soon as every live trainer
// has sent its gradient while the step receives (kRecv), on the optimize
// pool; the others run at the batch barrier. Both run the LR-decay block
// first, once per step, so every block sees the step's learning rate, and
// each block touches only its own parameters: the result is the barrier's.
// A block whose gradient completes while trainers still pull (kServe) waits
// for kRecv, and a checkpoint holds early blocks back until the step ends,
// so it always saves a step boundary.
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "pserver/parameter_server.h"
#include "pserver/pserver_metrics.h"

namespace oar {

absl::Status ParameterServer::RunSync() {
  while (true) {
    absl::StatusOr<bool> more = barrier_->AwaitPhaseEnd();
    if (!more.ok()) {
      barrier_->End(more.status());  // the Gets waiting for this step learn why it never came
      absl::MutexLock l(&state_mu_);
      if (stopped_ && absl::IsCancelled(more.status())) return absl::OkStatus();  // SIGTERM: clean exit
      if (absl::IsDeadlineExceeded(more.status()) && !refused_.empty()) {
        return absl::Status(more.status().code(), absl::StrCat(more.status().message(), RefusalsLocked()));
      }
      return more.status();
    }
    if (!*more) return absl::OkStatus();                       // every trainer completed
    if (barrier_->phase() != StepBarrier::Phase::kOptimize) {  // now kRecv: what completed while serving
      ScheduleReady();
      continue;
    }
    absl::Status s;
    {
      absl::MutexLock l(&optimize_mu_);
      s = RunOptimizeBlocks();
    }
    if (!s.ok()) {
      barrier_->End(s);  // every wait, parked Gets too, learns what failed
      return s;
    }
    barrier_->OptimizeDone();  // answers the Gets parked for this step, on this thread
    GetPserverMetrics().steps->Add();
  }
}

absl::Status ParameterServer::RunLrOnce() {
  absl::MutexLock l(&lr_once_mu_);
  if (lr_ran_) return absl::OkStatus();
  lr_ran_ = true;
  return RunLrBlock();
}

void ParameterServer::MaybeRunEarly(const VarStore::Receivable& r) {
  const std::set<int> completed = barrier_->completed();
  absl::MutexLock l(&step_mu_);
  if (holding_ > 0 || barrier_->phase() != StepBarrier::Phase::kRecv) return;
  TryScheduleLocked(r, completed);
}

void ParameterServer::ScheduleReady() {
  const std::set<int> completed = barrier_->completed();
  absl::MutexLock l(&step_mu_);
  if (holding_ > 0 || barrier_->phase() != StepBarrier::Phase::kRecv) return;
  for (const VarStore::Receivable* r : store_->receivables()) TryScheduleLocked(*r, completed);
}

void ParameterServer::TryScheduleLocked(const VarStore::Receivable& r, const std::set<int>& completed) {
  const int block = store_->BlockOf(r);
  // A block fed by several gradients waits for the barrier.
  if (scheduled_.count(block) || receivables_of_[block] != 1 || !store_->Ready(r, completed)) return;
  scheduled_.insert(block);
  ++running_;
  optimize_pool_->Schedule([this, rp = &r] { RunEarly(rp); });
}

void ParameterServer::RunEarly(const VarStore::Receivable* r) {
  UnlendIfDue();
  absl::Status s = RunLrOnce();
  if (s.ok()) s = store_->Finalize(*r, barrier_->completed());
  if (s.ok()) s = RunBlockLocked(store_->BlockOf(*r), scope_);
  store_->Release(*r);
  absl::MutexLock l(&step_mu_);
  early_error_.Update(s);
  --running_;
}

absl::Status ParameterServer::RunOptimizeBlocks() {
  std::set<int> done;
  {
    absl::MutexLock l(&step_mu_);
    step_mu_.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &running_));
    OAR_RETURN_IF_ERROR(early_error_);
    done = scheduled_;
  }
  UnlendIfDue();
  OAR_RETURN_IF_ERROR(RunLrOnce());
  const std::set<int> completed = barrier_->completed_at_optimize();
  std::vector<int> rest;
  for (int id : config_.optimize_blocks) {
    if (!done.count(id)) rest.push_back(id);
  }
  for (const VarStore::Receivable* r : store_->receivables()) {
    if (!done.count(store_->BlockOf(*r))) OAR_RETURN_IF_ERROR(store_->Finalize(*r, completed));
  }
  // The blocks left touch disjoint parameters: side by side, the last on
  // this thread (often the only one left after the early blocks ran: no
  // hand-off to the pool and back).
  absl::Mutex mu;
  absl::Status first;
  size_t left = rest.size();
  auto run = [this, &mu, &first, &left](int id) {
    absl::Status s = RunBlockLocked(id, scope_);
    absl::MutexLock l(&mu);
    first.Update(s);
    --left;
  };
  for (size_t i = 0; i + 1 < rest.size(); ++i) optimize_pool_->Schedule([&run, id = rest[i]] { run(id); });
  if (!rest.empty()) run(rest.back());
  {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(
        +[](size_t* n) { return *n == 0; }, &left));
  }
  for (const VarStore::Receivable* r : store_->receivables()) {
    if (!done.count(store_->BlockOf(*r))) store_->Release(*r);
  }
  {
    absl::MutexLock l(&lr_once_mu_);
    lr_ran_ = false;
  }
  absl::MutexLock l(&step_mu_);
  scheduled_.clear();
  return first;
}

absl::Status ParameterServer::HoldEarlyBlocks() {
  absl::MutexLock l(&step_mu_);
  ++holding_;
  // Until this step's early blocks (if any ran) are joined by the rest at
  // the barrier: then the state is a step boundary again.
  if (step_mu_.AwaitWithTimeout(absl::Condition(
                                    +[](ParameterServer* ps) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                      return ps->running_ == 0 && ps->scheduled_.empty();
                                    },
                                    this),
                                absl::Milliseconds(config_.timeout_ms))) {
    return absl::OkStatus();
  }
  --holding_;
  return absl::DeadlineExceededError("a checkpoint waited for the step in progress to end");
}

void ParameterServer::ResumeEarlyBlocks() {
  {
    absl::MutexLock l(&step_mu_);
    --holding_;
  }
  ScheduleReady();
}

}  // namespace oar
