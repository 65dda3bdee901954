// SyncLoop: a sync pserver's Run — the StepBarrier's phases, step after
// step, until every trainer has completed. Each time the step starts to
// receive (kServe → kRecv) it calls `receiving` (the pserver starts the
// optimize blocks whose gradients completed while it served); at the batch
// barrier (kOptimize) it calls `optimize`, the step's optimize pass, and
// then OptimizeDone, which answers on this thread the Gets parked for the
// step. A barrier that fails (a trainer never arrived, Stop) or an
// optimize pass that fails ends the barrier with that reason — every wait
// and parked Get hears it — and Run returns it.
//
//   SyncLoop loop(&barrier, {.receiving = [&] { StartReadyBlocks(); },
//                            .optimize = [&] { return RunOptimizeBlocks(); }});
//   absl::Status s = loop.Run();
//
// Thread-safety: Run on one thread (the pserver's); the hooks run on it.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "pserver/step_barrier.h"

namespace oar {

class SyncLoop {
 public:
  struct Hooks {
    std::function<void()> receiving = [] {};
    std::function<absl::Status()> optimize;
    // Whether the step in kOptimize has gradients to apply (an elastic
    // step whose trainers all waited for data has none: it is not applied).
    std::function<bool()> applies = [] { return true; };
  };
  // `barrier` must outlive the loop.
  SyncLoop(StepBarrier* barrier, Hooks hooks) : barrier_(barrier), hooks_(std::move(hooks)) {}

  // OK once every trainer completed; else the reason the job stopped.
  absl::Status Run();
  // Optimize passes run so far.
  int steps() const { return steps_; }

 private:
  StepBarrier* const barrier_;
  const Hooks hooks_;
  int steps_ = 0;  // Run's thread only
};

}  // namespace oar
