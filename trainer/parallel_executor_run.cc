// The ParallelExecutor's scheduler (parallel_executor.h): runs one step's
// SSA graph. With several places, op handles run on the pool, a worker
// going on inline with a handle it made ready on its own place; with one
// place, on the calling thread, which saves a hand-off per step. A handle
// that all-reduces across trainers runs on the ordered collectives' thread
// — or, when its turn has come and the caller has nothing else ready, on
// the caller at once — and its dependents become ready when it ends.
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status.h"
#include "common/framework/prepared_block.h"
#include "trainer/parallel_executor.h"
#include "trainer/parallel_executor_compiled.h"

namespace oar {

absl::Status ParallelExecutor::RunGraph(Compiled* c) {
  // Each op handle runs once its dependencies have; a finished handle
  // schedules the dependents it made ready before it stops counting as in
  // flight, so in_flight == 0 means the step is over (or stopped by an error).
  const SsaGraph& g = c->graph;
  absl::Mutex mu;
  std::vector<int> pending(g.ops.size());
  size_t in_flight = 0, done = 0;
  absl::Status first_error;
  // A worker runs one ready handle it made ready itself inline (no hand-off
  // through the pool's queue, no thread wake-up on a chain of ops) and
  // schedules only the others.
  std::function<void(size_t)> dispatch;  // to a worker: its place's, when one worker per place
  // Bookkeeping when handle `id` ends: the dependents it made ready (none
  // after an error); it leaves flight and they enter it.
  auto finish = [&](size_t id, const absl::Status& s) {
    const OpHandle& h = g.ops[id];
    std::vector<size_t> ready;
    bool failed_now = false;
    {
      absl::MutexLock lock(&mu);
      ++done;
      if (!s.ok() && first_error.ok()) {
        first_error = Annotate(s, h.kind == OpHandle::Kind::kCompute ? absl::StrCat("place ", h.place) : h.label);
        failed_now = true;
      }
      if (first_error.ok()) {
        for (size_t d : h.dependents) {
          if (--pending[d] == 0) ready.push_back(d);
        }
      }
      // Every ready handle enters flight before this one leaves it.
      in_flight += ready.size();
      if (!failed_now || ordered_ == nullptr) --in_flight;
    }
    if (failed_now && ordered_ != nullptr) {
      // Collectives waiting for a turn that will not come end too (each
      // leaves flight through this function); then this handle leaves.
      ordered_->Cancel(absl::CancelledError("the step failed"));
      absl::MutexLock lock(&mu);
      --in_flight;
    }
    return ready;
  };
  std::function<void(size_t)> run = [&](size_t id) {
    while (true) {
      const OpHandle& h = g.ops[id];
      absl::Status s;
      switch (h.kind) {
        case OpHandle::Kind::kCompute:
          s = c->blocks[h.place]->RunOpAt(h.op_index);
          break;
        case OpHandle::Kind::kAllReduce:
          s = AllReduce(h.var, -1, h.chunk, h.chunks);
          break;
        case OpHandle::Kind::kReduce:
          s = AllReduce(h.var, static_cast<int>(h.place));
          break;
        case OpHandle::Kind::kBroadcast:
          s = Broadcast(h.var, h.place);
          break;
        case OpHandle::Kind::kCrossAllReduce:
          // On the collectives' thread, in the trainers' common order; this
          // worker goes on with other handles meanwhile.
          ordered_->Submit(
              h.cross_index, [this, &h] { return CrossAllReduce(h); },
              [&, id](absl::Status st) {
                for (size_t r : finish(id, st)) dispatch(r);
              });
          return;
      }
      std::vector<size_t> ready = finish(id, s);
      if (ready.empty()) return;
      // Continue with a handle of this worker's place when there is one; hand
      // the others to the workers of their places.
      size_t next = 0;
      for (size_t k = 0; k < ready.size(); ++k) {
        if (g.ops[ready[k]].place == g.ops[id].place) {
          next = k;
          break;
        }
      }
      for (size_t k = 0; k < ready.size(); ++k) {
        if (k != next) dispatch(ready[k]);
      }
      id = ready[next];
    }
  };
  std::vector<size_t> roots;
  dispatch = [&](size_t r) {
    if (pool_->size() == static_cast<int>(places_.size())) {
      pool_->ScheduleOn(static_cast<int>(g.ops[r].place), [&run, r] { run(r); });
    } else {
      pool_->Schedule([&run, r] { run(r); });
    }
  };
  for (size_t i = 0; i < g.ops.size(); ++i) {
    pending[i] = static_cast<int>(g.ops[i].deps.size());
    if (pending[i] == 0) roots.push_back(i);
  }
  {
    absl::MutexLock lock(&mu);
    in_flight = roots.size();
  }
  if (ordered_ != nullptr) ordered_->BeginStep();
  for (size_t r : roots) dispatch(r);
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](size_t* n) { return *n == 0; }, &in_flight));
  if (first_error.ok() && done != g.ops.size()) {
    return absl::InternalError(
        absl::StrCat("ParallelExecutor: ", g.ops.size() - done, " op handles never became ready"));
  }
  return first_error;
}

absl::Status ParallelExecutor::RunGraphOnCaller(Compiled* c) {
  const SsaGraph& g = c->graph;
  absl::Mutex mu;
  std::vector<int> pending(g.ops.size());
  std::deque<size_t> ready;
  size_t async = 0, done = 0;  // cross-trainer handles under way; handles ended
  absl::Status first_error;
  auto finish = [&](size_t id, const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const OpHandle& h = g.ops[id];
    ++done;
    if (!s.ok() && first_error.ok()) {
      first_error = Annotate(s, h.kind == OpHandle::Kind::kCompute ? "" : h.label);
      if (ordered_ != nullptr) {
        // Calls waiting for a turn that will not come end too (after this
        // function returns: their callbacks take `mu`).
        return true;
      }
    }
    if (first_error.ok()) {
      for (size_t d : h.dependents) {
        if (--pending[d] == 0) ready.push_back(d);
      }
    }
    return false;
  };
  for (size_t i = 0; i < g.ops.size(); ++i) {
    pending[i] = static_cast<int>(g.ops[i].deps.size());
    if (pending[i] == 0) ready.push_back(i);
  }
  if (ordered_ != nullptr) ordered_->BeginStep();
  while (true) {
    size_t id;
    {
      absl::MutexLock l(&mu);
      struct Wake {
        std::deque<size_t>* ready;
        size_t* async;
      } w{&ready, &async};
      mu.Await(absl::Condition(
          +[](Wake* w) { return !w->ready->empty() || *w->async == 0; }, &w));
      if (ready.empty()) break;  // nothing ready and nothing under way: the step is over
      id = ready.front();
      ready.pop_front();
    }
    const OpHandle& h = g.ops[id];
    absl::Status s;
    if (h.kind == OpHandle::Kind::kCrossAllReduce) {
      bool inline_now;
      {
        absl::MutexLock l(&mu);
        inline_now = ready.empty() && ordered_->TryRunInline(h.cross_index);
        if (!inline_now) ++async;
      }
      if (!inline_now) {
        ordered_->Submit(
            h.cross_index, [this, &h] { return CrossAllReduce(h); },
            [&, id](absl::Status st) {
              bool cancel;
              {
                absl::MutexLock l(&mu);
                cancel = finish(id, st);
                --async;
              }
              if (cancel) ordered_->Cancel(absl::CancelledError("the step failed"));
            });
        continue;
      }
      s = CrossAllReduce(h);
      ordered_->InlineDone();
    } else {
      s = c->blocks[h.place]->RunOpAt(h.op_index);
    }
    bool cancel;
    {
      absl::MutexLock l(&mu);
      cancel = finish(id, s);
    }
    if (cancel) ordered_->Cancel(absl::CancelledError("the step failed"));
  }
  if (first_error.ok() && done != g.ops.size()) {
    return absl::InternalError(
        absl::StrCat("ParallelExecutor: ", g.ops.size() - done, " op handles never became ready"));
  }
  return first_error;
}

}  // namespace oar
