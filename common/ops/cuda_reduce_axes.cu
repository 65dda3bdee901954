// Device code of reduce_sum and reduce_mean over any set of axes and of
// their gradients (the broadcast back), and of clip, its gradient and
// clip_by_norm (the ops gradient clipping emits). For a reduction, one
// thread per output element walks its reduced elements in row-major order,
// the order the CPU kernel adds them in. Launch functions are declared in
// cuda_launch.h.
#include <cstdint>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_reduce.cuh"

namespace oar {
namespace cuda {
namespace {

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

template <typename T>
__global__ void ClipKernel(const T* x, T lo, T hi, T* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) {
    const T v = x[i] < lo ? lo : x[i];  // a NaN stays NaN, as with std::max/min on the CPU
    out[i] = v > hi ? hi : v;
  }
}

template <typename T>
__global__ void ClipGradKernel(const T* x, const T* g, T lo, T hi, T* dx, int64_t n) {
  OAR_GRID_STRIDE(i, n) dx[i] = x[i] > lo && x[i] < hi ? g[i] : T(0);
}

// sq[0] = sum(x²); one block.
template <typename T>
__global__ void SquaredSumKernel(const T* x, int64_t n, T* sq) {
  T a = T(0);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) a += x[i] * x[i];
  a = BlockReduceAll<T>(a);
  if (threadIdx.x == 0) sq[0] = a;
}

template <typename T>
__global__ void ScaleToNormKernel(const T* x, const T* sq, T max_norm, T* out, int64_t n) {
  const T norm = sqrt(sq[0]);
  const T k = norm > max_norm ? max_norm / norm : T(1);
  OAR_GRID_STRIDE(i, n) out[i] = x[i] * k;
}

}  // namespace

template <typename T>
void Clip(const T* x, T lo, T hi, T* out, int64_t n, cudaStream_t s) {
  if (n > 0) ClipKernel<T><<<GridFor(n), kThreads, 0, s>>>(x, lo, hi, out, n);
}

template <typename T>
void ClipGrad(const T* x, const T* g, T lo, T hi, T* dx, int64_t n, cudaStream_t s) {
  if (n > 0) ClipGradKernel<T><<<GridFor(n), kThreads, 0, s>>>(x, g, lo, hi, dx, n);
}

template <typename T>
void ClipByNorm(const T* x, T max_norm, T* scratch, T* out, int64_t n, cudaStream_t s) {
  SquaredSumKernel<T><<<1, 1024, 0, s>>>(x, n, scratch);
  if (n > 0) ScaleToNormKernel<T><<<GridFor(n), kThreads, 0, s>>>(x, scratch, max_norm, out, n);
}

template <typename T>
void ReduceAxes(const T* x, T* out, const ReduceLayout& l, int64_t out_n, T scale, cudaStream_t s) {
  if (out_n > 0) ReduceAxesKernel<T><<<GridFor(out_n), kThreads, 0, s>>>(x, out, l, StridesOf(l), out_n, scale);
}

template <typename T>
void ReduceAxesGrad(const T* g, T* dx, const ReduceLayout& l, int64_t x_n, T scale, cudaStream_t s) {
  if (x_n > 0) ReduceAxesGradKernel<T><<<GridFor(x_n), kThreads, 0, s>>>(g, dx, l, x_n, scale);
}

template void Clip<float>(const float*, float, float, float*, int64_t, cudaStream_t);
template void ClipGrad<float>(const float*, const float*, float, float, float*, int64_t, cudaStream_t);
template void ClipByNorm<float>(const float*, float, float*, float*, int64_t, cudaStream_t);
template void ReduceAxes<float>(const float*, float*, const ReduceLayout&, int64_t, float, cudaStream_t);
template void ReduceAxesGrad<float>(const float*, float*, const ReduceLayout&, int64_t, float, cudaStream_t);

}  // namespace cuda
}  // namespace oar
