// Block-wide sums for the device kernels (*.cu only): warp shuffles, then
// one value per warp through shared memory. Every thread of the block must
// call BlockSum; the result is valid in thread 0 (and broadcast by
// BlockSumAll to every thread).
//
// Thread-safety: device code; each call uses the block's own shared memory.
#pragma once

#include <cuda_runtime.h>

namespace oar {
namespace cuda {

constexpr int kThreads = 256;

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
