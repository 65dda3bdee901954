// Memory on a Place other than the plain CPU, and byte copies between any
// two places. Device memory comes from the GPU's stream-ordered pool
// (cudaMallocAsync / cudaFreeAsync on the place's stream, common/device/
// cuda_context.h), pinned host memory from cudaMallocHost.
//
// Copy ordering: every copy touching a GPU is ordered on that GPU's stream,
// after the kernels already queued there.
//   - host -> GPU from pageable memory returns once the source may be
//     reused (it goes through the pinned staging buffers, chunk by chunk,
//     the memcpy into one buffer overlapping the DMA out of the other); the
//     DMA may still run. From pinned memory the copy is only queued: the
//     source must stay unchanged until the place's stream has passed it.
//   - GPU -> host returns when the bytes are in place.
// In a build without CUDA every GPU or pinned request fails.
//
// Thread-safety: all functions are safe to call from any thread.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "common/device/place.h"

namespace oar {

// `bytes` of memory on `place` (CUDA or pinned, not CPU). Running out of
// device memory stops the process with a message naming the place and the
// size, as running out of host memory does.
void* AllocOn(const Place& place, size_t bytes);
// Gives back memory from AllocOn(place, ...).
void FreeOn(const Place& place, void* p);

// Copies `n` bytes from `src` on `src_place` to `dst` on `dst_place`.
absl::Status CopyBytes(const Place& dst_place, void* dst, const Place& src_place, const void* src, size_t n);

// Waits until everything queued on `place`'s stream has run (nothing to do
// for host places). Surfaces an error a kernel hit.
absl::Status SyncPlace(const Place& place);

}  // namespace oar
