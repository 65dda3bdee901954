// Device code of the small tensor ops: cast between the five dtypes the op
// library uses, increment of a one-value counter, dropout's mask and its
// gradient, batch_norm's 1/sqrt(var + eps) for the global-statistics
// path, and transpose's permutation of axes. Launch functions are declared in cuda_launch.h.
#include <cstdint>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_reduce.cuh"

namespace oar {
namespace cuda {
namespace {

template <typename In, typename Out>
__global__ void CastKernel(const In* x, Out* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) out[i] = static_cast<Out>(x[i]);
}

template <typename T>
__global__ void IncrementKernel(const T* x, T* out, T step) {
  out[0] = x[0] + step;
}

template <typename T>
__global__ void DropoutMaskKernel(const T* x, T* mask, T* y, int64_t n, float p, T keep_scale) {
  OAR_GRID_STRIDE(i, n) {
    // cuRAND's u is in (0, 1]; 1 - u is in [0, 1), as the CPU kernel's draw.
    const bool drop = 1.0f - static_cast<float>(mask[i]) < p;
    mask[i] = drop ? T(0) : T(1);
    y[i] = drop ? T(0) : x[i] * keep_scale;
  }
}

template <typename T>
__global__ void MaskedScaleKernel(const T* g, const T* mask, T k, T* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) out[i] = g[i] * mask[i] * k;
}

template <typename T>
__global__ void InvStdKernel(const T* var, T eps, T* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) out[i] = T(1) / sqrt(var[i] + eps);
}

template <typename T>
__global__ void PermuteKernel(const T* x, PermuteLayout l, T* out, int64_t n) {
  OAR_GRID_STRIDE(o, n) {
    int64_t src = 0, rest = o;
    for (int i = l.rank - 1; i >= 0; --i) {
      src += (rest % l.out_dims[i]) * l.src_strides[i];
      rest /= l.out_dims[i];
    }
    out[o] = x[src];
  }
}

}  // namespace

template <typename T>
void Permute(const T* x, const PermuteLayout& l, T* out, int64_t n, cudaStream_t s) {
  if (n > 0) PermuteKernel<T><<<GridFor(n), kThreads, 0, s>>>(x, l, out, n);
}

template <typename In, typename Out>
void Cast(const In* x, Out* out, int64_t n, cudaStream_t s) {
  if (n > 0) CastKernel<In, Out><<<GridFor(n), kThreads, 0, s>>>(x, out, n);
}

template <typename T>
void Increment(const T* x, T* out, T step, cudaStream_t s) {
  IncrementKernel<T><<<1, 1, 0, s>>>(x, out, step);
}

template <typename T>
void DropoutMask(const T* x, T* mask, T* y, int64_t n, float p, T keep_scale, cudaStream_t s) {
  if (n > 0) DropoutMaskKernel<T><<<GridFor(n), kThreads, 0, s>>>(x, mask, y, n, p, keep_scale);
}

template <typename T>
void MaskedScale(const T* g, const T* mask, T k, T* out, int64_t n, cudaStream_t s) {
  if (n > 0) MaskedScaleKernel<T><<<GridFor(n), kThreads, 0, s>>>(g, mask, k, out, n);
}

template <typename T>
void InvStd(const T* var, T eps, T* out, int64_t n, cudaStream_t s) {
  if (n > 0) InvStdKernel<T><<<GridFor(n), kThreads, 0, s>>>(var, eps, out, n);
}

#define OAR_CAST_TO(In)                                                        \
  template void Cast<In, float>(const In*, float*, int64_t, cudaStream_t);     \
  template void Cast<In, double>(const In*, double*, int64_t, cudaStream_t);   \
  template void Cast<In, int32_t>(const In*, int32_t*, int64_t, cudaStream_t); \
  template void Cast<In, int64_t>(const In*, int64_t*, int64_t, cudaStream_t); \
  template void Cast<In, bool>(const In*, bool*, int64_t, cudaStream_t);
OAR_CAST_TO(float)
OAR_CAST_TO(double)
OAR_CAST_TO(int32_t)
OAR_CAST_TO(int64_t)
OAR_CAST_TO(bool)
#undef OAR_CAST_TO

template void Increment<float>(const float*, float*, float, cudaStream_t);
template void Increment<double>(const double*, double*, double, cudaStream_t);
template void Increment<int32_t>(const int32_t*, int32_t*, int32_t, cudaStream_t);
template void Increment<int64_t>(const int64_t*, int64_t*, int64_t, cudaStream_t);
template void DropoutMask<float>(const float*, float*, float*, int64_t, float, float, cudaStream_t);
template void MaskedScale<float>(const float*, const float*, float, float*, int64_t, cudaStream_t);
template void InvStd<float>(const float*, float, float*, int64_t, cudaStream_t);
template void Permute<float>(const float*, const PermuteLayout&, float*, int64_t, cudaStream_t);

}  // namespace cuda
}  // namespace oar
