// Fluid's per-element update rules that a dense kernel and a rows-only
// (sparse-gradient) kernel both apply (*.cu only), so each formula is
// written once: Adam's bias-corrected step and adagrad's.
//
// Thread-safety: device functions of their arguments alone.
#pragma once

#include <cuda_runtime.h>

namespace oar {
namespace cuda {

// Adam's step size and epsilon after bias correction, the same for every
// element of a step: lr·√(1−β₂ᵗ)/(1−β₁ᵗ) and ε·√(1−β₂ᵗ) (Fluid's form).
template <typename T>
struct AdamRate {
  T lr, eps;
};

// advance1/advance2 multiply the powers first: 1 for the powers as read, or
// β1/β2 for the step that reads them already advanced (Paddle's CPU kernel
// for a sparse gradient with the powers bound in place).
template <typename T>
__device__ AdamRate<T> AdamBiasCorrected(const T* lr, const T* beta1_pow, const T* beta2_pow, T eps, T advance1 = T(1),
                                         T advance2 = T(1)) {
  const T corr2 = sqrt(T(1) - beta2_pow[0] * advance2);
  return {lr[0] * corr2 / (T(1) - beta1_pow[0] * advance1), eps * corr2};
}

// One element: the moments' new values into *m1, *m2 and the parameter's
// into *p (each may be where its old value came from).
template <typename T>
__device__ void AdamUpdate(const AdamRate<T>& r, T b1, T b2, T g, T p_in, T m1_in, T m2_in, T* p, T* m1, T* m2) {
  const T a = b1 * m1_in + (T(1) - b1) * g;
  const T b = b2 * m2_in + (T(1) - b2) * g * g;
  *m1 = a;
  *m2 = b;
  *p = p_in - r.lr * (a / (sqrt(b) + r.eps));
}

// adagrad on one element with its new moment m already summed: the new
// parameter value.
template <typename T>
__device__ T AdagradParam(T p, T g, T m, T lr, T eps) {
  return p - lr * g / (sqrt(m) + eps);
}

}  // namespace cuda
}  // namespace oar
