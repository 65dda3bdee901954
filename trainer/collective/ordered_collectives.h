// OrderedCollectives: runs the all-reduces a data-parallel step sends across
// trainers one at a time, on a thread of its own, in the order the SSA graph
// numbered them — the same order on every trainer, whatever order this
// trainer's backward pass finishes its gradients in (collectives must be
// issued in one order everywhere, or the ring mixes up tensors). A call
// whose turn has not come waits here, not on a worker: backward goes on
// while earlier gradients cross the network.
//
//   ordered.BeginStep(graph.cross_ops);
//   ordered.Submit(h.cross_index, [&] { return ring->AllReduce(&g, name); },
//                  [&](absl::Status s) { /* the handle is done */ });
//
// Shutdown order (the destructor): stop flag → the thread finishes the call
// in progress → join; calls not yet run are dropped.
//
// Thread-safety: Submit from any thread; BeginStep between steps.
#pragma once

#include <functional>
#include <map>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace oar {

class OrderedCollectives {
 public:
  OrderedCollectives();
  ~OrderedCollectives();
  OrderedCollectives(const OrderedCollectives&) = delete;
  OrderedCollectives& operator=(const OrderedCollectives&) = delete;

  // A new step: calls are numbered from 0 again; any left over are dropped.
  void BeginStep();
  // Runs `work` once calls 0..index-1 of this step have run, then `done`
  // with its status (both on the collectives' thread).
  void Submit(size_t index, std::function<absl::Status()> work, std::function<void(absl::Status)> done);
  // The step failed elsewhere: calls waiting for their turn (and any
  // submitted later this step) end at once with `why`, without running.
  void Cancel(const absl::Status& why);
  // True when call `index` may run now on the caller's own thread (its turn
  // has come and the collectives' thread is idle): the caller then runs it
  // and calls InlineDone(). Saves two thread hand-offs when the caller has
  // nothing else to do meanwhile.
  bool TryRunInline(size_t index);
  void InlineDone();

 private:
  struct Call {
    std::function<absl::Status()> work;
    std::function<void(absl::Status)> done;
  };
  void Loop();
  absl::Mutex mu_;
  std::map<size_t, Call> waiting_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status cancelled_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // a call is running (on the thread or inline)
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace oar
