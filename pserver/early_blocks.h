// EarlyBlocks: a sync pserver's optimize blocks that run before the batch
// barrier. While a step receives, a block whose gradients every live
// trainer has sent can run at once, on the optimize pool, instead of
// waiting for the slowest trainer's barrier; the barrier's pass then runs
// only the blocks left. Each block touches its own parameters, so the
// step's result is the barrier's.
//
// This object decides and accounts, nothing more: whether a block may start
// (not held by a checkpoint, not started already this step, and eligible by
// the caller's test, made under its lock), starts it on the pool, and lets
// the barrier's pass join what started (Join) and close the step (EndStep).
// A checkpoint holds it (Hold) until the step's early blocks were joined by
// the rest — a step boundary — and releases it after saving (Resume).
//
//   EarlyBlocks early(pool);
//   early.TryStart(block, [&] { return phase_is_recv && store.Ready(r); }, [&] { return RunBlock(block); });
//   ...                                     // at the barrier:
//   OAR_ASSIGN_OR_RETURN(std::set<int> ran, early.Join());
//   ... run the blocks not in `ran` ...
//   early.EndStep();
//
// Thread-safety: all methods may be called concurrently. Its lock is taken
// before the caller's `eligible` test runs (which may take leaf locks: the
// barrier's, the store's) and never while `run` runs.
#pragma once

#include <functional>
#include <set>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/thread_pool.h"

namespace oar {

class EarlyBlocks {
 public:
  // `pool` runs the blocks; it must outlive this object's last started run.
  explicit EarlyBlocks(ThreadPool* pool) : pool_(pool) {}

  // Starts `run` for `block` on the pool and returns true, unless a
  // checkpoint holds the blocks, `block` was started already this step, or
  // `eligible()` (called under the lock) says no.
  bool TryStart(int block, absl::FunctionRef<bool()> eligible, std::function<absl::Status()> run);
  // Waits for every started run to end; the first error among them, or the
  // blocks started this step (which the caller then need not run).
  absl::StatusOr<std::set<int>> Join();
  // The step's pass is over: blocks may start again for the next one.
  void EndStep();

  // Holds new starts until the step's started blocks were joined and the
  // step ended (a step boundary), waiting at most `timeout`;
  // DeadlineExceeded (and no hold) when it did not come.
  absl::Status Hold(absl::Duration timeout);
  // Ends one Hold.
  void Resume();

 private:
  ThreadPool* const pool_;
  absl::Mutex mu_;
  std::set<int> started_ ABSL_GUARDED_BY(mu_);  // this step's
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int holding_ ABSL_GUARDED_BY(mu_) = 0;  // checkpoints waiting for, or at, a step boundary
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oar
