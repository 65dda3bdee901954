#include "common/base/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "common/base/thread_pool.h"

namespace oar {
namespace {

// Shared with the helper tasks, which may outlive the call.
struct Chunks {
  int64_t n = 0, count = 0;
  const std::function<void(int64_t, int64_t)>* fn = nullptr;  // valid while a chunk is unfinished
  std::atomic<int64_t> next{0};
  absl::Mutex mu;
  int64_t done ABSL_GUARDED_BY(mu) = 0;

  // Runs chunks until none is left untaken.
  void Drain() {
    while (true) {
      const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= count) return;
      const int64_t lo = n * c / count, hi = n * (c + 1) / count;
      (*fn)(lo, hi);
      absl::MutexLock l(&mu);
      ++done;
    }
  }
};

}  // namespace

void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  grain = std::max<int64_t>(grain, 1);
  if (pool == nullptr || n < 2 * grain) {
    if (n > 0) fn(0, n);
    return;
  }
  auto chunks = std::make_shared<Chunks>();
  chunks->n = n;
  chunks->count = std::min<int64_t>(n / grain, pool->size() + 1);
  chunks->fn = &fn;
  for (int64_t h = 1; h < chunks->count; ++h) pool->Schedule([chunks] { chunks->Drain(); });
  chunks->Drain();
  absl::MutexLock l(&chunks->mu);
  chunks->mu.Await(absl::Condition(
      +[](Chunks* c) ABSL_NO_THREAD_SAFETY_ANALYSIS { return c->done == c->count; }, chunks.get()));
}

}  // namespace oar
