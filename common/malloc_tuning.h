// MapLargeAllocations: makes glibc serve every allocation of at least
// `threshold` bytes with its own mapping, returned to the system on free.
//
// Why: a pserver allocates and frees large buffers every step (received
// gradients, merge buffers, gRPC's message slices). glibc's default mmap
// threshold is dynamic: after the first large free it rises past the block
// size, so later blocks come from per-thread arenas, and what those arenas
// free stays resident — on the 256 MiB Adam model with 4 trainers, 100–200
// MiB of peak RSS that nothing uses. A fixed threshold keeps peak RSS at
// what is live, at the price of page faults on each new large buffer.
//
// Respects the operator: when MALLOC_MMAP_THRESHOLD_ is set in the
// environment (glibc's own tunable) it is left alone. Returns whether the
// threshold was set.
//
// Thread-safety: call once at start-up; later calls are no-ops.
#pragma once

#include <cstddef>

namespace oar {

bool MapLargeAllocations(size_t threshold = size_t{1} << 20);

}  // namespace oar
