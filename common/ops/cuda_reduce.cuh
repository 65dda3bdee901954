// Device helpers for the kernels (*.cu only): the grid-stride loop, and
// block-wide sums and maxima (warp shuffles, then one value per warp
// through shared memory; every thread of the block must call
// BlockReduceAll, which returns the result to each).
//
// Thread-safety: device code; each call uses the block's own shared memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace oar {
namespace cuda {

constexpr int kThreads = 256;

// A grid-stride loop: `i` visits [0, n) across every thread of the grid.
#define OAR_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Blocks for a grid-stride loop over n elements.
inline unsigned GridFor(long long n) {
  long long b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b > 65535LL * 16 ? 65535LL * 16 : b);
}

template <typename T>
__device__ T WarpSum(T v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

template <typename T>
__device__ T WarpMax(T v) {
  for (int off = 16; off > 0; off >>= 1) {
    T o = __shfl_down_sync(0xffffffffu, v, off);
    v = o > v ? o : v;
  }
  return v;
}

// Sum (or max, with IsMax) over the block, returned to every thread.
template <typename T, bool IsMax = false>
__device__ T BlockReduceAll(T v) {
  __shared__ T partial[32];
  __shared__ T result;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = IsMax ? WarpMax(v) : WarpSum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) >> 5;
    T w = lane < warps ? partial[lane] : partial[0];
    if (!IsMax && lane >= warps) w = T(0);
    w = IsMax ? WarpMax(w) : WarpSum(w);
    if (lane == 0) result = w;
  }
  __syncthreads();
  T out = result;
  __syncthreads();  // `result` and `partial` may be reused by the next call
  return out;
}

}  // namespace cuda
}  // namespace oar
