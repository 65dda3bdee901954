// Device code of sequence_pool and its gradient: one thread per element of
// a pooled row (sequence s, column k), which walks the sequence's rows.
// Launch functions are declared in cuda_launch.h.
#include <cstdint>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_reduce.cuh"

namespace oar {
namespace cuda {
namespace {

template <typename T>
__global__ void SequencePoolKernel(SequencePool p, const T* x, const int64_t* offsets, int64_t seqs, int64_t width,
                                   T pad, T* out, int32_t* max_index) {
  OAR_GRID_STRIDE(o, seqs * width) {
    const int64_t s = o / width, k = o % width;
    const int64_t b = offsets[s], e = offsets[s + 1], len = e - b;
    int32_t best_row = -1;
    T v = pad;
    if (len > 0) {
      switch (p) {
        case SequencePool::kFirst:
          v = x[b * width + k];
          break;
        case SequencePool::kLast:
          v = x[(e - 1) * width + k];
          break;
        case SequencePool::kMax: {
          int64_t best = b;
          for (int64_t r = b + 1; r < e; ++r) {
            if (x[r * width + k] > x[best * width + k]) best = r;
          }
          v = x[best * width + k];
          best_row = static_cast<int32_t>(best);
          break;
        }
        default: {
          T sum = T(0);
          for (int64_t r = b; r < e; ++r) sum += x[r * width + k];
          v = p == SequencePool::kSum ? sum : p == SequencePool::kAverage ? sum / T(len) : sum / sqrt(T(len));
        }
      }
    }
    out[o] = v;
    if (max_index != nullptr) max_index[o] = best_row;
  }
}

template <typename T>
__global__ void SequencePoolGradKernel(SequencePool p, const T* dout, const int64_t* offsets, const int32_t* max_index,
                                       int64_t seqs, int64_t width, T* dx, unsigned long long* bad) {
  OAR_GRID_STRIDE(o, seqs * width) {
    const int64_t s = o / width, k = o % width;
    const int64_t b = offsets[s], e = offsets[s + 1], len = e - b;
    if (len == 0) continue;
    const T g = dout[o];
    switch (p) {
      case SequencePool::kFirst:
        dx[b * width + k] = g;
        break;
      case SequencePool::kLast:
        dx[(e - 1) * width + k] = g;
        break;
      case SequencePool::kMax: {
        const int64_t r = max_index[o];
        if (r < b || r >= e) {
          atomicMin(bad, static_cast<unsigned long long>(o));
        } else {
          dx[r * width + k] = g;
        }
        break;
      }
      default: {
        const T share = p == SequencePool::kSum ? g : p == SequencePool::kAverage ? g / T(len) : g / sqrt(T(len));
        for (int64_t r = b; r < e; ++r) dx[r * width + k] = share;
      }
    }
  }
}

}  // namespace

template <typename T>
void SequencePoolForward(SequencePool p, const T* x, const int64_t* offsets, int64_t seqs, int64_t width, T pad, T* out,
                         int32_t* max_index, cudaStream_t s) {
  const int64_t n = seqs * width;
  if (n > 0) SequencePoolKernel<T><<<GridFor(n), kThreads, 0, s>>>(p, x, offsets, seqs, width, pad, out, max_index);
}

template <typename T>
void SequencePoolGrad(SequencePool p, const T* dout, const int64_t* offsets, const int32_t* max_index, int64_t seqs,
                      int64_t width, T* dx, int64_t* bad, cudaStream_t s) {
  const int64_t n = seqs * width;
  if (n > 0) {
    // INT64_MAX before and flat positions after: the same order as unsigned.
    SequencePoolGradKernel<T><<<GridFor(n), kThreads, 0, s>>>(p, dout, offsets, max_index, seqs, width, dx,
                                                              reinterpret_cast<unsigned long long*>(bad));
  }
}

template void SequencePoolForward<float>(SequencePool, const float*, const int64_t*, int64_t, int64_t, float, float*,
                                         int32_t*, cudaStream_t);
template void SequencePoolGrad<float>(SequencePool, const float*, const int64_t*, const int32_t*, int64_t, int64_t,
                                      float*, int64_t*, cudaStream_t);

}  // namespace cuda
}  // namespace oar
