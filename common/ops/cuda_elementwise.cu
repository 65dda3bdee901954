// Device code of the pointwise ops: fill, scale, sums, elementwise binary
// ops with broadcast, the dense sgd, momentum and adam updates and the
// affine map of cuRAND's uniforms (activations: cuda_math.cu). Launch functions are declared in cuda_launch.h.
#include <cstdint>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_reduce.cuh"
#include "common/ops/cuda_update_rules.cuh"

namespace oar {
namespace cuda {
namespace {

template <typename T>
__global__ void FillKernel(T* out, int64_t n, T value) {
  OAR_GRID_STRIDE(i, n) out[i] = value;
}

template <typename T>
__global__ void FillFromDeviceKernel(T* out, int64_t n, const T* src, T scale) {
  const T v = scale * src[0];
  OAR_GRID_STRIDE(i, n) out[i] = v;
}

template <typename T>
__global__ void ScaleKernel(const T* x, T* out, int64_t n, T a, T b, bool after) {
  OAR_GRID_STRIDE(i, n) out[i] = after ? a * x[i] + b : a * (x[i] + b);
}

template <typename T>
__global__ void SumAllKernel(const T* x, int64_t n, T scale, T* out) {
  T s = T(0);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  s = BlockReduceAll<T>(s);
  if (threadIdx.x == 0) out[0] = scale * s;
}

template <typename T>
__global__ void AddToKernel(const T* x, T* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) out[i] += x[i];
}

template <typename T>
__device__ T BinaryF(Binary f, T x, T y) {
  switch (f) {
    case Binary::kAdd:
      return x + y;
    case Binary::kSub:
      return x - y;
    case Binary::kMul:
      return x * y;
    case Binary::kDiv:
      return x / y;
    case Binary::kPow:
      return pow(x, y);
    case Binary::kMax:
      return x > y ? x : y;
    case Binary::kMin:
      return x < y ? x : y;
  }
  return T(0);
}

template <typename T>
__device__ T BinaryDX(Binary f, T x, T y, T g) {
  switch (f) {
    case Binary::kAdd:
    case Binary::kSub:
      return g;
    case Binary::kMul:
      return g * y;
    case Binary::kDiv:
      return g / y;
    case Binary::kPow:
      return g * y * pow(x, y - T(1));
    case Binary::kMax:
      return x > y ? g : T(0);  // a tie sends the gradient to Y, as the CPU kernel
    case Binary::kMin:
      return x < y ? g : T(0);
  }
  return T(0);
}

template <typename T>
__device__ T BinaryDY(Binary f, T x, T y, T out, T g) {
  switch (f) {
    case Binary::kAdd:
      return g;
    case Binary::kSub:
      return -g;
    case Binary::kMul:
      return g * x;
    case Binary::kDiv:
      return -g * out / y;
    case Binary::kPow:
      return g * pow(x, y) * log(x);  // no Out: Fluid's pow grad has none
    case Binary::kMax:
      return x > y ? T(0) : g;
    case Binary::kMin:
      return x < y ? T(0) : g;
  }
  return T(0);
}

template <typename T>
__global__ void ElementwiseForwardKernel(Binary f, const T* x, const T* y, T* out, int64_t total, int64_t n,
                                         int64_t post) {
  OAR_GRID_STRIDE(e, total) out[e] = BinaryF(f, x[e], y[(e / post) % n]);
}

template <typename T>
__global__ void ElementwiseGradXKernel(Binary f, const T* x, const T* y, const T* dout, T* dx, int64_t total, int64_t n,
                                       int64_t post) {
  OAR_GRID_STRIDE(e, total) dx[e] = BinaryDX(f, x != nullptr ? x[e] : T(0), y[(e / post) % n], dout[e]);
}

// Same shapes: dy is pointwise.
template <typename T>
__global__ void ElementwiseGradYSameKernel(Binary f, const T* x, const T* y, const T* out, const T* dout, T* dy,
                                           int64_t total) {
  OAR_GRID_STRIDE(e, total)
  dy[e] = BinaryDY(f, x != nullptr ? x[e] : T(0), y[e], out != nullptr ? out[e] : T(0), dout[e]);
}

// Broadcast: block j sums dy[j] over its pre * post positions.
template <typename T>
__global__ void ElementwiseGradYReduceKernel(Binary f, const T* x, const T* y, const T* out, const T* dout, T* dy,
                                             int64_t pre, int64_t n, int64_t post) {
  for (int64_t j = blockIdx.x; j < n; j += gridDim.x) {
    const T yj = y[j];
    T s = T(0);
    for (int64_t t = threadIdx.x; t < pre * post; t += blockDim.x) {
      const int64_t e = ((t / post) * n + j) * post + t % post;
      s += BinaryDY(f, x != nullptr ? x[e] : T(0), yj, out != nullptr ? out[e] : T(0), dout[e]);
    }
    s = BlockReduceAll<T>(s);
    if (threadIdx.x == 0) dy[j] = s;
  }
}

template <typename T>
__global__ void SgdKernel(const T* p, const T* g, const T* lr, T* pout, int64_t n) {
  const T rate = lr[0];
  OAR_GRID_STRIDE(i, n) pout[i] = p[i] - rate * g[i];
}

template <typename T>
__global__ void MomentumKernel(const T* p, const T* g, const T* v, const T* lr, T mu, bool nesterov, T rescale, T decay,
                               T* pout, T* vout, int64_t n) {
  const T rate = lr[0];
  OAR_GRID_STRIDE(i, n) {
    const T gi = g[i] * rescale + decay * p[i];
    const T nv = mu * v[i] + gi;
    vout[i] = nv;
    pout[i] = nesterov ? p[i] - (gi + mu * nv) * rate : p[i] - rate * nv;
  }
}

template <typename T>
__global__ void AdamKernel(const T* p, const T* g, const T* lr, const T* m1, const T* m2, const T* beta1_pow,
                           const T* beta2_pow, T b1, T b2, T eps, T* pout, T* m1out, T* m2out, int64_t n) {
  const AdamRate<T> r = AdamBiasCorrected(lr, beta1_pow, beta2_pow, eps);
  OAR_GRID_STRIDE(i, n) AdamUpdate(r, b1, b2, g[i], p[i], m1[i], m2[i], &pout[i], &m1out[i], &m2out[i]);
}

// After AdamKernel on the same stream: the powers may be updated in place
// only once every thread above has read them.
template <typename T>
__global__ void AdamPowsKernel(const T* beta1_pow, const T* beta2_pow, T b1, T b2, T* beta1_pow_out, T* beta2_pow_out) {
  if (beta1_pow_out != nullptr) beta1_pow_out[0] = beta1_pow[0] * b1;
  if (beta2_pow_out != nullptr) beta2_pow_out[0] = beta2_pow[0] * b2;
}

template <typename T>
__global__ void AffineUniformKernel(T* p, int64_t n, T lo, T hi) {
  // (0, 1] -> [lo, hi); 1 - u rounds to 1 for u < 2^-24, and lo + (hi - lo)
  // may round up to hi: both are kept below hi.
  const T below_hi = nextafter(hi, lo);
  OAR_GRID_STRIDE(i, n) {
    const T v = lo + (hi - lo) * (T(1) - p[i]);
    p[i] = lo < hi && v >= hi ? below_hi : v;
  }
}

}  // namespace

template <typename T>
void Fill(T* out, int64_t n, T value, cudaStream_t s) {
  if (n > 0) FillKernel<T><<<GridFor(n), kThreads, 0, s>>>(out, n, value);
}

template <typename T>
void FillFromDevice(T* out, int64_t n, const T* src, T scale, cudaStream_t s) {
  if (n > 0) FillFromDeviceKernel<T><<<GridFor(n), kThreads, 0, s>>>(out, n, src, scale);
}

template <typename T>
void Scale(const T* x, T* out, int64_t n, T a, T b, bool after, cudaStream_t s) {
  if (n > 0) ScaleKernel<T><<<GridFor(n), kThreads, 0, s>>>(x, out, n, a, b, after);
}

template <typename T>
void SumAll(const T* x, int64_t n, T scale, T* out, cudaStream_t s) {
  SumAllKernel<T><<<1, 1024, 0, s>>>(x, n, scale, out);
}

template <typename T>
void AddTo(const T* x, T* out, int64_t n, cudaStream_t s) {
  if (n > 0) AddToKernel<T><<<GridFor(n), kThreads, 0, s>>>(x, out, n);
}

template <typename T>
void ElementwiseForward(Binary f, const T* x, const T* y, T* out, int64_t pre, int64_t n, int64_t post,
                        cudaStream_t s) {
  const int64_t total = pre * n * post;
  if (total > 0) ElementwiseForwardKernel<T><<<GridFor(total), kThreads, 0, s>>>(f, x, y, out, total, n, post);
}

template <typename T>
void ElementwiseGradX(Binary f, const T* x, const T* y, const T* out, const T* dout, T* dx, int64_t pre, int64_t n,
                      int64_t post, cudaStream_t s) {
  const int64_t total = pre * n * post;
  if (total > 0) ElementwiseGradXKernel<T><<<GridFor(total), kThreads, 0, s>>>(f, x, y, dout, dx, total, n, post);
}

template <typename T>
void ElementwiseGradY(Binary f, const T* x, const T* y, const T* out, const T* dout, T* dy, int64_t pre, int64_t n,
                      int64_t post, cudaStream_t s) {
  if (n <= 0) return;
  if (pre == 1 && post == 1) {
    ElementwiseGradYSameKernel<T><<<GridFor(n), kThreads, 0, s>>>(f, x, y, out, dout, dy, n);
    return;
  }
  const unsigned blocks = static_cast<unsigned>(n < 65535 * 16 ? n : 65535 * 16);
  ElementwiseGradYReduceKernel<T><<<blocks, kThreads, 0, s>>>(f, x, y, out, dout, dy, pre, n, post);
}

template <typename T>
void Sgd(const T* p, const T* g, const T* lr, T* pout, int64_t n, cudaStream_t s) {
  if (n > 0) SgdKernel<T><<<GridFor(n), kThreads, 0, s>>>(p, g, lr, pout, n);
}

template <typename T>
void Momentum(const T* p, const T* g, const T* v, const T* lr, T mu, bool nesterov, T rescale, T decay, T* pout,
              T* vout, int64_t n, cudaStream_t s) {
  if (n > 0)
    MomentumKernel<T><<<GridFor(n), kThreads, 0, s>>>(p, g, v, lr, mu, nesterov, rescale, decay, pout, vout, n);
}

template <typename T>
void Adam(const T* p, const T* g, const T* lr, const T* m1, const T* m2, const T* beta1_pow, const T* beta2_pow, T b1,
          T b2, T eps, T* pout, T* m1out, T* m2out, T* beta1_pow_out, T* beta2_pow_out, int64_t n, cudaStream_t s) {
  if (n > 0) {
    AdamKernel<T>
        <<<GridFor(n), kThreads, 0, s>>>(p, g, lr, m1, m2, beta1_pow, beta2_pow, b1, b2, eps, pout, m1out, m2out, n);
  }
  if (beta1_pow_out != nullptr || beta2_pow_out != nullptr) {
    AdamPowsKernel<T><<<1, 1, 0, s>>>(beta1_pow, beta2_pow, b1, b2, beta1_pow_out, beta2_pow_out);
  }
}

template <typename T>
void AffineUniform(T* p, int64_t n, T lo, T hi, cudaStream_t s) {
  if (n > 0) AffineUniformKernel<T><<<GridFor(n), kThreads, 0, s>>>(p, n, lo, hi);
}

#define OAR_FLOATING(T)                                                                                                \
  template void FillFromDevice<T>(T*, int64_t, const T*, T, cudaStream_t);                                             \
  template void SumAll<T>(const T*, int64_t, T, T*, cudaStream_t);                                                     \
  template void AddTo<T>(const T*, T*, int64_t, cudaStream_t);                                                         \
  template void ElementwiseForward<T>(Binary, const T*, const T*, T*, int64_t, int64_t, int64_t, cudaStream_t);        \
  template void ElementwiseGradX<T>(Binary, const T*, const T*, const T*, const T*, T*, int64_t, int64_t, int64_t,     \
                                    cudaStream_t);                                                                     \
  template void ElementwiseGradY<T>(Binary, const T*, const T*, const T*, const T*, T*, int64_t, int64_t, int64_t,     \
                                    cudaStream_t);                                                                     \
  template void Sgd<T>(const T*, const T*, const T*, T*, int64_t, cudaStream_t);                                       \
  template void Momentum<T>(const T*, const T*, const T*, const T*, T, bool, T, T, T*, T*, int64_t, cudaStream_t);     \
  template void Adam<T>(const T*, const T*, const T*, const T*, const T*, const T*, const T*, T, T, T, T*, T*, T*, T*, \
                        T*, int64_t, cudaStream_t);                                                                    \
  template void AffineUniform<T>(T*, int64_t, T, T, cudaStream_t);
OAR_FLOATING(float)
#undef OAR_FLOATING

template void Fill<float>(float*, int64_t, float, cudaStream_t);
template void Fill<double>(double*, int64_t, double, cudaStream_t);
template void Fill<int32_t>(int32_t*, int64_t, int32_t, cudaStream_t);
template void Fill<int64_t>(int64_t*, int64_t, int64_t, cudaStream_t);
template void Fill<bool>(bool*, int64_t, bool, cudaStream_t);
template void Scale<float>(const float*, float*, int64_t, float, float, bool, cudaStream_t);
template void Scale<int64_t>(const int64_t*, int64_t*, int64_t, int64_t, int64_t, bool, cudaStream_t);

}  // namespace cuda
}  // namespace oar
