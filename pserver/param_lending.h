// ParamLending: a sync pserver's parameters lent to the trainers on its
// host. Lend moves the parameters the optimize blocks write into one
// shared-memory region (rpc/stream/shared_region.h) that the stream
// transport lends to trainers reaching the pserver over shm: a barrier
// Get's reply then says where the value lies, and the trainer reads it
// there until its next gradient for it (the sync step guarantees no block
// writes it before).
//
// A trainer that completes stops sending gradients while the others may
// train on, so from then on the region must keep the values every trainer
// last read: MarkDue (before the COMPLETE counts), and the parameters move
// back into private memory — each under the lock of the block that writes
// it — before the next optimize block runs (UnlendIfDue). Later Gets copy.
//
//   ParamLending lending(scope, [&](const std::string& p) { return BlockLockOf(p); }, [&] { return Name(); });
//   server_options.lend = lending.Lend(params_written_by_blocks);
//   ... on a sync COMPLETE:  lending.MarkDue();
//   ... before any block:    lending.UnlendIfDue();
//
// Thread-safety: all methods may be called concurrently. Its lock is taken
// before the block locks (a second caller of UnlendIfDue waits until every
// parameter has moved); nothing else is taken under it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/framework/scope.h"
#include "common/rpc/stream/shared_region.h"

namespace oar {

class ParamLending {
 public:
  // `lock_of(name)`: the lock of the block that writes parameter `name`,
  // held while it moves out; null when no block writes it. `who()`: how
  // logs name the server ("pserver 127.0.0.1:6174").
  ParamLending(Scope* scope, std::function<absl::Mutex*(const std::string&)> lock_of, std::function<std::string()> who)
      : scope_(scope), lock_of_(std::move(lock_of)), who_(std::move(who)) {}

  // Moves the initialized CPU tensors among `names` into a new region and
  // returns it; null (logged) when there are none or it cannot be made.
  std::shared_ptr<const rpc::stream::SharedRegion> Lend(const std::set<std::string>& names);
  // A trainer completed: the parameters are to move back before the next
  // optimize block runs.
  void MarkDue() { due_.store(true); }
  // When due, moves every lent parameter still in the region back into
  // memory of its own (the value unchanged); otherwise nothing.
  void UnlendIfDue();
  // The parameters now lent (test and log use).
  std::vector<std::string> lent() const;

 private:
  Scope* const scope_;
  const std::function<absl::Mutex*(const std::string&)> lock_of_;
  const std::function<std::string()> who_;
  mutable absl::Mutex mu_;                              // held while the parameters move out
  std::vector<std::string> lent_ ABSL_GUARDED_BY(mu_);  // Lend moved them into the region
  std::atomic<bool> due_{false};
};

}  // namespace oar
