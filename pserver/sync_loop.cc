#include "pserver/sync_loop.h"

#include "pserver/pserver_metrics.h"

namespace oar {

absl::Status SyncLoop::Run() {
  while (true) {
    absl::StatusOr<bool> more = barrier_->AwaitPhaseEnd();
    if (!more.ok()) {
      barrier_->End(more.status());  // the Gets waiting for this step learn why it never came
      return more.status();
    }
    if (!*more) return absl::OkStatus();                       // every trainer completed
    if (barrier_->phase() != StepBarrier::Phase::kOptimize) {  // now kRecv: what completed while serving
      hooks_.receiving();
      continue;
    }
    absl::Status s = hooks_.applies() ? hooks_.optimize() : absl::OkStatus();
    if (!s.ok()) {
      barrier_->End(s);  // every wait, parked Gets too, learns what failed
      return s;
    }
    barrier_->OptimizeDone();  // answers the Gets parked for this step, on this thread
    ++steps_;
    GetPserverMetrics().steps->Add();
  }
}

}  // namespace oar
