// Device code of embeddings and sparse (SelectedRows) gradients:
// lookup_table's row gather, the zeroing of padding rows, the scatter-add
// that builds its dense gradient, densifies a sparse one or merges its
// repeated rows, and the rows-only updates (sgd, adagrad, lazy Adam) over
// the rows a merged sparse gradient names (and non-lazy Adam's step on the
// rows it does not name). Launch functions are declared
// in cuda_launch.h.
#include <cstdint>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_reduce.cuh"
#include "common/ops/cuda_update_rules.cuh"

namespace oar {
namespace cuda {
namespace {

template <typename T>
__global__ void GatherRowsKernel(const T* table, const int64_t* ids, T* out, int64_t n, int64_t width, int64_t pad) {
  OAR_GRID_STRIDE(e, n * width) {
    const int64_t i = e / width, k = e % width;
    const int64_t id = ids[i];
    out[e] = id == pad ? T(0) : table[id * width + k];
  }
}

template <typename T>
__global__ void ScatterAddRowsKernel(const T* value, const int64_t* rows, T* dense, int64_t n, int64_t width,
                                     int64_t pad) {
  OAR_GRID_STRIDE(e, n * width) {
    const int64_t i = e / width, k = e % width;
    const int64_t row = rows[i];
    if (row == pad) continue;
    atomicAdd(dense + row * width + k, value[e]);
  }
}

template <typename T>
__global__ void ZeroPaddedRowsKernel(T* v, const int64_t* ids, int64_t n, int64_t width, int64_t pad) {
  OAR_GRID_STRIDE(e, n * width) {
    if (ids[e / width] == pad) v[e] = T(0);
  }
}

// The rows-only updates: element e of the merged gradient g [n, width]
// belongs to parameter element rows[e / width] * width + e % width; the
// rows are distinct, so each element has one writer.

// Fluid's bias-corrected Adam (as cuda_elementwise.cu's AdamKernel), in
// place on the given rows only.
template <typename T>
__global__ void AdamRowsKernel(const int64_t* rows, int64_t n, int64_t width, const T* g, const T* lr,
                               const T* beta1_pow, const T* beta2_pow, T b1, T b2, T eps, bool advanced, T* p, T* m1,
                               T* m2) {
  const AdamRate<T> r =
      AdamBiasCorrected(lr, beta1_pow, beta2_pow, eps, advanced ? b1 : T(1), advanced ? b2 : T(1));
  OAR_GRID_STRIDE(e, n * width) {
    const int64_t i = rows[e / width] * width + e % width;
    AdamUpdate(r, b1, b2, g[e], p[i], m1[i], m2[i], &p[i], &m1[i], &m2[i]);
  }
}

__global__ void MarkRowsKernel(const int64_t* rows, int64_t n, uint8_t* mask) {
  OAR_GRID_STRIDE(i, n) mask[rows[i]] = 1;
}

// Every element of a row the mask does not mark: a zero gradient's Adam step
// with ε unscaled.
template <typename T>
__global__ void AdamUnmarkedRowsKernel(const uint8_t* mask, int64_t height, int64_t width, const T* lr,
                                       const T* beta1_pow, const T* beta2_pow, T b1, T b2, T eps, bool advanced, T* p,
                                       T* m1, T* m2) {
  const AdamRate<T> r =
      AdamBiasCorrected(lr, beta1_pow, beta2_pow, eps, advanced ? b1 : T(1), advanced ? b2 : T(1));
  OAR_GRID_STRIDE(i, height * width) {
    if (mask[i / width] != 0) continue;
    const T a = b1 * m1[i], b = b2 * m2[i];
    m1[i] = a;
    m2[i] = b;
    p[i] -= r.lr * (a / (sqrt(b) + eps));
  }
}

template <typename T>
__global__ void SgdRowsKernel(const int64_t* rows, int64_t n, int64_t width, const T* g, const T* lr, T* p) {
  OAR_GRID_STRIDE(e, n * width) {
    const int64_t i = rows[e / width] * width + e % width;
    p[i] = p[i] - lr[0] * g[e];
  }
}

template <typename T>
__global__ void AdagradRowsKernel(const int64_t* rows, int64_t n, int64_t width, const T* g, const T* lr, T eps, T* p,
                                  T* mom) {
  OAR_GRID_STRIDE(e, n * width) {
    const int64_t i = rows[e / width] * width + e % width;
    const T m = mom[i] + g[e] * g[e];
    mom[i] = m;
    p[i] = AdagradParam(p[i], g[e], m, lr[0], eps);
  }
}

}  // namespace

template <typename T>
void GatherRows(const T* table, const int64_t* ids, T* out, int64_t n, int64_t width, int64_t pad, cudaStream_t s) {
  if (n * width > 0) GatherRowsKernel<T><<<GridFor(n * width), kThreads, 0, s>>>(table, ids, out, n, width, pad);
}

template <typename T>
void ScatterAddRows(const T* value, const int64_t* rows, T* dense, int64_t n, int64_t width, int64_t pad,
                    cudaStream_t s) {
  if (n * width > 0) {
    ScatterAddRowsKernel<T><<<GridFor(n * width), kThreads, 0, s>>>(value, rows, dense, n, width, pad);
  }
}

template <typename T>
void ZeroPaddedRows(T* v, const int64_t* ids, int64_t n, int64_t width, int64_t pad, cudaStream_t s) {
  if (pad != -1 && n * width > 0)
    ZeroPaddedRowsKernel<T><<<GridFor(n * width), kThreads, 0, s>>>(v, ids, n, width, pad);
}

template <typename T>
void AdamRows(const int64_t* rows, int64_t n, int64_t width, const T* g, const T* lr, const T* beta1_pow,
              const T* beta2_pow, T b1, T b2, T eps, bool advanced, T* p, T* m1, T* m2, cudaStream_t s) {
  if (n * width > 0) {
    AdamRowsKernel<T><<<GridFor(n * width), kThreads, 0, s>>>(rows, n, width, g, lr, beta1_pow, beta2_pow, b1, b2,
                                                              eps, advanced, p, m1, m2);
  }
}

template <typename T>
void AdamRowsWithoutGrad(const int64_t* rows, int64_t n, int64_t height, int64_t width, const T* lr,
                         const T* beta1_pow, const T* beta2_pow, T b1, T b2, T eps, bool advanced, uint8_t* mask, T* p,
                         T* m1, T* m2, cudaStream_t s) {
  if (height * width == 0) return;
  cudaMemsetAsync(mask, 0, static_cast<size_t>(height), s);
  if (n > 0) MarkRowsKernel<<<GridFor(n), kThreads, 0, s>>>(rows, n, mask);
  AdamUnmarkedRowsKernel<T><<<GridFor(height * width), kThreads, 0, s>>>(mask, height, width, lr, beta1_pow, beta2_pow,
                                                                         b1, b2, eps, advanced, p, m1, m2);
}

template void GatherRows<float>(const float*, const int64_t*, float*, int64_t, int64_t, int64_t, cudaStream_t);
template void GatherRows<double>(const double*, const int64_t*, double*, int64_t, int64_t, int64_t, cudaStream_t);
template void ScatterAddRows<float>(const float*, const int64_t*, float*, int64_t, int64_t, int64_t, cudaStream_t);
template void ScatterAddRows<double>(const double*, const int64_t*, double*, int64_t, int64_t, int64_t, cudaStream_t);
template void ZeroPaddedRows<float>(float*, const int64_t*, int64_t, int64_t, int64_t, cudaStream_t);
template <typename T>
void SgdRows(const int64_t* rows, int64_t n, int64_t width, const T* g, const T* lr, T* p, cudaStream_t s) {
  if (n * width > 0) SgdRowsKernel<T><<<GridFor(n * width), kThreads, 0, s>>>(rows, n, width, g, lr, p);
}

template <typename T>
void AdagradRows(const int64_t* rows, int64_t n, int64_t width, const T* g, const T* lr, T eps, T* p, T* mom,
                 cudaStream_t s) {
  if (n * width > 0) AdagradRowsKernel<T><<<GridFor(n * width), kThreads, 0, s>>>(rows, n, width, g, lr, eps, p, mom);
}

template void SgdRows<float>(const int64_t*, int64_t, int64_t, const float*, const float*, float*, cudaStream_t);
template void AdagradRows<float>(const int64_t*, int64_t, int64_t, const float*, const float*, float, float*, float*,
                                 cudaStream_t);
template void AdamRows<float>(const int64_t*, int64_t, int64_t, const float*, const float*, const float*, const float*,
                              float, float, float, bool, float*, float*, float*, cudaStream_t);
template void AdamRowsWithoutGrad<float>(const int64_t*, int64_t, int64_t, int64_t, const float*, const float*,
                                         const float*, float, float, float, bool, uint8_t*, float*, float*, float*,
                                         cudaStream_t);

}  // namespace cuda
}  // namespace oar
