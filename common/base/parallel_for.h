// ParallelFor: elementwise work over [0, n) cut into chunks of at least
// `grain` elements, run by the caller and by helper tasks on a ThreadPool,
// returning once every chunk ran. What a sync pserver's optimizer kernels
// use for a large parameter at the step's barrier, when the trainers wait
// and the cores are free (RunEnv::intra_op).
//
//   ParallelFor(pool, n, 1 << 16, [&](int64_t lo, int64_t hi) { Update(lo, hi); });
//
// The caller takes chunks too and waits only for those a helper has begun,
// so a pool whose threads are all busy (or in a ParallelFor themselves)
// cannot hold it up: the chunks no helper took, the caller runs. A helper
// that starts after the last chunk was taken does nothing.
//
// Thread-safety: `fn` runs concurrently on disjoint ranges; ParallelFor may
// be called from any thread, the pool's own included.
#pragma once

#include <cstdint>
#include <functional>

namespace oar {

class ThreadPool;

// `pool` null, or fewer than 2 x grain elements: fn(0, n) on the caller.
void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace oar
