// ThreadPool: a fixed set of worker threads running queued closures. The
// destructor runs what is already queued, then joins (shutdown order: stop
// flag → workers drain the queue → join); nothing may be scheduled after
// destruction has begun.
//
// Thread-safety: Schedule is safe for concurrent use.
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace oar {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> fn);
  // Schedules `fn` unless `max_queued` closures already wait in the shared
  // queue; false (and `fn` dropped) then. For callers that must bound memory
  // under a flood, answering "busy" instead of queueing.
  bool TrySchedule(std::function<void()> fn, size_t max_queued);
  // Runs `fn` on worker `worker % size()` (keeps a data-parallel place's
  // ops on one core and its caches); that worker takes its own queue first,
  // the shared one next.
  void ScheduleOn(int worker, std::function<void()> fn);
  int size() const { return static_cast<int>(workers_.size()); }

 private:
  void Work(size_t index);

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::deque<std::function<void()>>> own_ ABSL_GUARDED_BY(mu_);  // per worker
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace oar
