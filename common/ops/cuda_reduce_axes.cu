// Device code of reduce_sum and reduce_mean over any set of axes and of
// their gradients (the broadcast back). One thread per output element
// walks its reduced elements in row-major order, the order the CPU kernel
// adds them in. Launch functions are declared in cuda_launch.h.
#include <cstdint>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_reduce.cuh"

namespace oar {
namespace cuda {
namespace {

#define OAR_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Row-major strides of the input, and the count of reduced elements per
// output element.
struct Strides {
  int64_t of[kMaxReduceRank];
  int64_t reduced_count;
};

Strides StridesOf(const ReduceLayout& l) {
  Strides s{};
  int64_t stride = 1;
  s.reduced_count = 1;
  for (int i = l.rank - 1; i >= 0; --i) {
    s.of[i] = stride;
    stride *= l.dims[i];
    if (l.reduced[i]) s.reduced_count *= l.dims[i];
  }
  return s;
}

template <typename T>
__global__ void ReduceAxesKernel(const T* x, T* out, ReduceLayout l, Strides st, int64_t out_n, T scale) {
  OAR_GRID_STRIDE(o, out_n) {
    // The input offset of output element o's first reduced element.
    int64_t base = 0, rest = o;
    for (int i = l.rank - 1; i >= 0; --i) {
      if (l.reduced[i]) continue;
      base += (rest % l.dims[i]) * st.of[i];
      rest /= l.dims[i];
    }
    T sum = T(0);
    for (int64_t r = 0; r < st.reduced_count; ++r) {
      int64_t off = base, left = r;
      for (int i = l.rank - 1; i >= 0; --i) {
        if (!l.reduced[i]) continue;
        off += (left % l.dims[i]) * st.of[i];
        left /= l.dims[i];
      }
      sum += x[off];
    }
    out[o] = sum * scale;
  }
}

template <typename T>
__global__ void ReduceAxesGradKernel(const T* g, T* dx, ReduceLayout l, int64_t x_n, T scale) {
  OAR_GRID_STRIDE(e, x_n) {
    // The output element of input element e: its kept coordinates.
    int64_t o = 0, mul = 1, rest = e;
    for (int i = l.rank - 1; i >= 0; --i) {
      const int64_t c = rest % l.dims[i];
      rest /= l.dims[i];
      if (l.reduced[i]) continue;
      o += c * mul;
      mul *= l.dims[i];
    }
    dx[e] = g[o] * scale;
  }
}

}  // namespace

template <typename T>
void ReduceAxes(const T* x, T* out, const ReduceLayout& l, int64_t out_n, T scale, cudaStream_t s) {
  if (out_n > 0) ReduceAxesKernel<T><<<GridFor(out_n), kThreads, 0, s>>>(x, out, l, StridesOf(l), out_n, scale);
}

template <typename T>
void ReduceAxesGrad(const T* g, T* dx, const ReduceLayout& l, int64_t x_n, T scale, cudaStream_t s) {
  if (x_n > 0) ReduceAxesGradKernel<T><<<GridFor(x_n), kThreads, 0, s>>>(g, dx, l, x_n, scale);
}

template void ReduceAxes<float>(const float*, float*, const ReduceLayout&, int64_t, float, cudaStream_t);
template void ReduceAxesGrad<float>(const float*, float*, const ReduceLayout&, int64_t, float, cudaStream_t);

}  // namespace cuda
}  // namespace oar
