// Timer: runs closures at given times on one thread of its own — the
// in-process transport's call deadlines and the fault injector's delays.
// Closures run in time order; each should be short (hand longer work to a
// pool). The destructor runs nothing more: closures not yet due are dropped
// (shutdown order: stop flag → thread wakes → join).
//
//   Timer timer;
//   timer.At(absl::Now() + absl::Milliseconds(20), [] { ... });
//
// Thread-safety: At is safe for concurrent use.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace oar::rpc {

class Timer {
 public:
  Timer();
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Runs `fn` on the timer's thread at (or soon after) `when`; returns an id
  // for Cancel.
  uint64_t At(absl::Time when, std::function<void()> fn);
  // Drops closure `id` unless it already ran (or is running).
  void Cancel(uint64_t id);

 private:
  void Loop();
  absl::Mutex mu_;
  std::map<std::pair<absl::Time, uint64_t>, std::function<void()>> due_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, absl::Time> when_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace oar::rpc
