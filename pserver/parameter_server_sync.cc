// ParameterServer's sync step: the optimize blocks of each step, run by
// the SyncLoop (sync_loop.h) over StepBarrier's phases. A block runs as soon as every live trainer
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
#include "pserver/departure_watch.h"
#include "pserver/parameter_server.h"
#include "pserver/sync_loop.h"

namespace oar {

absl::Status ParameterServer::RunSync() {
  SyncLoop loop(barrier_.get(), {.receiving = [this] { ScheduleReady(); },
                                 .optimize =
                                     [this] {
                                       absl::MutexLock l(&optimize_mu_);
                                       return RunOptimizeBlocks();
                                     },
                                 .applies = [this] { return !barrier_->contributors_at_optimize().empty(); }});
  std::unique_ptr<DepartureWatch> watch;
  if (ElasticSync()) {
    watch = std::make_unique<DepartureWatch>(barrier_.get(), config_.trainer_members, config_.agree_on_leave, Name());
    watch->Start();
  }
  absl::Status s = loop.Run();
  watch.reset();
  if (s.ok()) return s;
  absl::MutexLock l(&state_mu_);
  if (stopped_ && absl::IsCancelled(s)) return absl::OkStatus();  // SIGTERM: clean exit
  if (absl::IsDeadlineExceeded(s) && !refused_.empty()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), RefusalsLocked()));
  }
  return s;
}

absl::Status ParameterServer::RunLrOnce() {
  absl::MutexLock l(&lr_once_mu_);
  if (lr_ran_) return absl::OkStatus();
  lr_ran_ = true;
  return RunLrBlock();
}

void ParameterServer::MaybeRunEarly(const VarStore::Receivable& r) { TryStartEarly(r, barrier_->completed()); }

void ParameterServer::ScheduleReady() {
  const std::set<int> completed = barrier_->completed();
  for (const VarStore::Receivable* r : store_->receivables()) TryStartEarly(*r, completed);
}

void ParameterServer::TryStartEarly(const VarStore::Receivable& r, const std::set<int>& completed) {
  if (ElasticSync()) return;  // the step's contributors are known at the barrier only
  const int block = store_->BlockOf(r);
  auto feeds = receivables_of_.find(block);
  if (feeds == receivables_of_.end() || feeds->second != 1) return;  // several gradients: the barrier runs it
  early_->TryStart(
      block, [&] { return barrier_->phase() == StepBarrier::Phase::kRecv && store_->Ready(r, completed); },
      [this, rp = &r] { return RunEarly(rp); });
}

absl::Status ParameterServer::RunEarly(const VarStore::Receivable* r) {
  lending_->UnlendIfDue();
  absl::Status s = RunLrOnce();
  if (s.ok()) s = store_->Finalize(*r, barrier_->completed());
  if (s.ok()) s = RunBlockLocked(store_->BlockOf(*r), scope_);
  store_->Release(*r);
  return s;
}

absl::Status ParameterServer::RunOptimizeBlocks() {
  OAR_ASSIGN_OR_RETURN(const std::set<int> done, early_->Join());
  lending_->UnlendIfDue();
  OAR_RETURN_IF_ERROR(RunLrOnce());
  const std::set<int> completed = barrier_->completed_at_optimize();
  const std::set<int> contributors = barrier_->contributors_at_optimize();
  std::vector<int> rest;
  for (int id : config_.optimize_blocks) {
    if (!done.count(id)) rest.push_back(id);
  }
  for (const VarStore::Receivable* r : store_->receivables()) {
    if (done.count(store_->BlockOf(*r))) continue;
    OAR_RETURN_IF_ERROR(ElasticSync() ? store_->FinalizeAmong(*r, contributors) : store_->Finalize(*r, completed));
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
  early_->EndStep();
  return first;
}

absl::Status ParameterServer::HoldEarlyBlocks() { return early_->Hold(absl::Milliseconds(config_.timeout_ms)); }

void ParameterServer::ResumeEarlyBlocks() {
  early_->Resume();
  ScheduleReady();
}

}  // namespace oar
