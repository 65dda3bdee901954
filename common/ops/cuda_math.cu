// Device code of the unary math ops (the activations relu, sigmoid, tanh
// and exp, sqrt, square, cos, abs, floor, ceil, sign, with their
// gradients), fused_elemwise_activation's add-then-activate, the comparisons (less_than, ..., not_equal) and the
// logical ops. Launch functions are declared in cuda_launch.h.
#include <cstdint>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_reduce.cuh"

namespace oar {
namespace cuda {
namespace {

template <typename T>
__device__ T ActivationF(Activation a, T v) {
  switch (a) {
    case Activation::kRelu:
      return v > T(0) ? v : T(0);
    case Activation::kSigmoid:
      return T(1) / (T(1) + exp(-v));
    case Activation::kTanh:
      return tanh(v);
    case Activation::kExp:
      return exp(v);
    case Activation::kSqrt:
      return sqrt(v);
    case Activation::kSquare:
      return v * v;
    case Activation::kCos:
      return cos(v);
    case Activation::kAbs:
      return fabs(v);
    case Activation::kFloor:
      return floor(v);
    case Activation::kCeil:
      return ceil(v);
    case Activation::kSign:
      return v > T(0) ? T(1) : (v < T(0) ? T(-1) : T(0));
  }
  return T(0);
}

// s is Out or X, as ActivationGrad's comment says.
template <typename T>
__device__ T ActivationD(Activation a, T s, T g) {
  switch (a) {
    case Activation::kRelu:
      return s > T(0) ? g : T(0);
    case Activation::kSigmoid:
      return g * s * (T(1) - s);
    case Activation::kTanh:
      return g * (T(1) - s * s);
    case Activation::kExp:
      return g * s;
    case Activation::kSqrt:
      return g * T(0.5) / s;
    case Activation::kSquare:
      return g * T(2) * s;
    case Activation::kCos:
      return -g * sin(s);
    case Activation::kAbs:
      return s > T(0) ? g : (s < T(0) ? -g : T(0));
    case Activation::kFloor:
    case Activation::kCeil:
    case Activation::kSign:
      return T(0);
  }
  return T(0);
}

template <typename T>
__global__ void ActivationForwardKernel(Activation a, const T* x, T* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) out[i] = ActivationF(a, x[i]);
}

template <typename T>
__global__ void ActivationGradKernel(Activation a, const T* src, const T* dout, T* dx, int64_t n) {
  OAR_GRID_STRIDE(i, n) dx[i] = ActivationD(a, src[i], dout[i]);
}

template <typename T>
__global__ void FusedAddActivationKernel(Activation a, const T* x, const T* y, T* out, T* inter, int64_t total,
                                         int64_t n, int64_t post) {
  OAR_GRID_STRIDE(e, total) {
    const T v = x[e] + y[(e / post) % n];
    if (inter != nullptr) inter[e] = v;
    out[e] = ActivationF(a, v);
  }
}

template <typename T>
__global__ void CompareKernel(Compare c, const T* x, const T* y, bool y_scalar, bool* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) {
    const T a = x[i], b = y[y_scalar ? 0 : i];
    bool r = false;
    switch (c) {
      case Compare::kLess:
        r = a < b;
        break;
      case Compare::kLessEqual:
        r = a <= b;
        break;
      case Compare::kGreater:
        r = a > b;
        break;
      case Compare::kGreaterEqual:
        r = a >= b;
        break;
      case Compare::kEqual:
        r = a == b;
        break;
      case Compare::kNotEqual:
        r = a != b;
        break;
    }
    out[i] = r;
  }
}

__global__ void LogicKernel(Logic l, const bool* x, const bool* y, bool y_scalar, bool* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) {
    const bool a = x[i];
    const bool b = l == Logic::kNot ? false : y[y_scalar ? 0 : i];
    switch (l) {
      case Logic::kNot:
        out[i] = !a;
        break;
      case Logic::kAnd:
        out[i] = a && b;
        break;
      case Logic::kOr:
        out[i] = a || b;
        break;
      case Logic::kXor:
        out[i] = a != b;
        break;
    }
  }
}

}  // namespace

template <typename T>
void ActivationForward(Activation a, const T* x, T* out, int64_t n, cudaStream_t s) {
  if (n > 0) ActivationForwardKernel<T><<<GridFor(n), kThreads, 0, s>>>(a, x, out, n);
}

template <typename T>
void ActivationGrad(Activation a, const T* src, const T* dout, T* dx, int64_t n, cudaStream_t s) {
  if (n > 0) ActivationGradKernel<T><<<GridFor(n), kThreads, 0, s>>>(a, src, dout, dx, n);
}

template <typename T>
void FusedAddActivation(Activation a, const T* x, const T* y, T* out, T* inter, int64_t pre, int64_t n, int64_t post,
                        cudaStream_t s) {
  const int64_t total = pre * n * post;
  if (total > 0) FusedAddActivationKernel<T><<<GridFor(total), kThreads, 0, s>>>(a, x, y, out, inter, total, n, post);
}

template <typename T>
void CompareOp(Compare c, const T* x, const T* y, bool y_scalar, bool* out, int64_t n, cudaStream_t s) {
  if (n > 0) CompareKernel<T><<<GridFor(n), kThreads, 0, s>>>(c, x, y, y_scalar, out, n);
}

void LogicOp(Logic l, const bool* x, const bool* y, bool y_scalar, bool* out, int64_t n, cudaStream_t s) {
  if (n > 0) LogicKernel<<<GridFor(n), kThreads, 0, s>>>(l, x, y, y_scalar, out, n);
}

template void ActivationForward<float>(Activation, const float*, float*, int64_t, cudaStream_t);
template void ActivationGrad<float>(Activation, const float*, const float*, float*, int64_t, cudaStream_t);
template void FusedAddActivation<float>(Activation, const float*, const float*, float*, float*, int64_t, int64_t,
                                        int64_t, cudaStream_t);
template void CompareOp<float>(Compare, const float*, const float*, bool, bool*, int64_t, cudaStream_t);
template void CompareOp<double>(Compare, const double*, const double*, bool, bool*, int64_t, cudaStream_t);
template void CompareOp<int32_t>(Compare, const int32_t*, const int32_t*, bool, bool*, int64_t, cudaStream_t);
template void CompareOp<int64_t>(Compare, const int64_t*, const int64_t*, bool, bool*, int64_t, cudaStream_t);

}  // namespace cuda
}  // namespace oar
