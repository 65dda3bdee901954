// How glibc's malloc returns large blocks to the system, set once per
// process by its role.
//
// MapLargeAllocations (pservers): every allocation of at least `threshold`
// bytes gets its own mapping, returned to the system on free. A pserver
// allocates and frees large buffers every step (received gradients, merge
// buffers, gRPC's message slices). glibc's default mmap threshold is
// dynamic: after the first large free it rises past the block size, so
// later blocks come from per-thread arenas, and what those arenas free
// stays resident — on the 256 MiB Adam model with 4 trainers, 100–200 MiB
// of peak RSS that nothing uses. A fixed threshold keeps peak RSS at what
// is live, at the price of page faults on each new large buffer.
//
// KeepLargeAllocations (trainers): the opposite. A pserver-mode trainer
// allocates the same large buffers every step — each weight gradient gets
// a fresh buffer, because the block views that split_byref made of the
// previous step's one (and sent) still share it — and with glibc's
// defaults each comes back from the system zeroed, page by page: about 30
// page faults per fashion_mlp step, 8% of the 2 × 2 job's examples/s on a
// 2-core host. Freed blocks up to 32 MiB stay in the heap and the heap is
// trimmed only past 256 MiB free at its top, so a step reuses the previous
// step's memory. Peak RSS stays the step's working set.
//
// Both respect the operator: when MALLOC_MMAP_THRESHOLD_ or
// MALLOC_TRIM_THRESHOLD_ is set in the environment, or GLIBC_TUNABLES sets
// glibc.malloc.mmap_threshold or trim_threshold (glibc's own tunables),
// nothing is changed. Each returns whether it set the policy; only the
// first call in a process does anything (a test process that runs a
// trainer and a pserver keeps the first one's).
//
// Thread-safety: call at start-up; later calls are no-ops.
#pragma once

#include <cstddef>

namespace oar {

bool MapLargeAllocations(size_t threshold = size_t{1} << 20);
bool KeepLargeAllocations();

}  // namespace oar
