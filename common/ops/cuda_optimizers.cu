// Device code of the update ops beyond sgd, momentum and adam: adagrad,
// decayed_adagrad, adamax, rmsprop (plain and centered), ftrl, each one
// fused elementwise kernel with the CPU kernel's arithmetic, and
// lars_momentum (a one-block pass for the two norms, then the update); the learning
// rate and beta power are read on the device. Launch functions are
// declared in cuda_launch.h.
#include <cstdint>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_reduce.cuh"
#include "common/ops/cuda_update_rules.cuh"

namespace oar {
namespace cuda {
namespace {

template <typename T>
__global__ void AdagradKernel(const T* p, const T* g, const T* mom, const T* lr, T decay, bool decayed, T eps, T* pout,
                              T* mout, int64_t n) {
  OAR_GRID_STRIDE(i, n) {
    const T gi = g[i];
    const T m = decayed ? decay * mom[i] + (T(1) - decay) * gi * gi : mom[i] + gi * gi;
    mout[i] = m;
    pout[i] = AdagradParam(p[i], gi, m, lr[0], eps);
  }
}

template <typename T>
__global__ void AdamaxKernel(const T* p, const T* g, const T* lr, const T* mom, const T* inf, const T* beta1_pow, T b1,
                             T b2, T eps, T* pout, T* mout, T* iout, int64_t n) {
  const T lr_t = lr[0] / (T(1) - beta1_pow[0]);
  OAR_GRID_STRIDE(i, n) {
    const T m = b1 * mom[i] + (T(1) - b1) * g[i];
    const T a = b2 * inf[i] + eps, b = fabs(g[i]);
    const T u = a > b ? a : b;
    mout[i] = m;
    iout[i] = u;
    pout[i] = p[i] - lr_t * m / u;
  }
}

template <typename T>
__global__ void RmspropKernel(const T* p, const T* g, const T* ms, const T* mom, const T* mg, const T* lr, T rho, T eps,
                              T mu, T* pout, T* msout, T* mout, T* mgout, int64_t n) {
  OAR_GRID_STRIDE(i, n) {
    const T gi = g[i];
    const T s = rho * ms[i] + (T(1) - rho) * gi * gi;
    msout[i] = s;
    T denom = s + eps;
    if (mg != nullptr) {
      const T a = rho * mg[i] + (T(1) - rho) * gi;
      mgout[i] = a;
      denom = s - a * a + eps;
    }
    const T m = mu * mom[i] + lr[0] * gi / sqrt(denom);
    mout[i] = m;
    pout[i] = p[i] - m;
  }
}

template <typename T>
__global__ void FtrlKernel(const T* p, const T* g, const T* sq, const T* lin, const T* lr, T l1, T l2, T power, T* pout,
                           T* sqout, T* linout, int64_t n) {
  const bool sqrt_power = power == T(-0.5);
  OAR_GRID_STRIDE(i, n) {
    const T gi = g[i];
    const T acc = sq[i] + gi * gi;
    const T sigma = sqrt_power ? (sqrt(acc) - sqrt(sq[i])) / lr[0] : (pow(acc, -power) - pow(sq[i], -power)) / lr[0];
    const T l = lin[i] + gi - sigma * p[i];
    const T y = (sqrt_power ? sqrt(acc) : pow(acc, -power)) / lr[0] + T(2) * l2;
    const T x = l1 * (l > T(0) ? T(1) : (l < T(0) ? T(-1) : T(0))) - l;
    pout[i] = fabs(l) > l1 ? x / y : T(0);
    sqout[i] = acc;
    linout[i] = l;
  }
}

// norms[0] = sum(p²), norms[1] = sum(g²); one block.
template <typename T>
__global__ void SquaredNormsKernel(const T* p, const T* g, int64_t n, T* norms) {
  T a = T(0), b = T(0);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    a += p[i] * p[i];
    b += g[i] * g[i];
  }
  a = BlockReduceAll<T>(a);
  b = BlockReduceAll<T>(b);
  if (threadIdx.x == 0) {
    norms[0] = a;
    norms[1] = b;
  }
}

template <typename T>
__global__ void LarsMomentumKernel(const T* p, const T* g, const T* v, const T* lr, const T* norms, T mu, T coeff, T wd,
                                   T* pout, T* vout, int64_t n) {
  const T pn = sqrt(norms[0]), gn = sqrt(norms[1]);
  const T local_lr = pn > T(0) && gn > T(0) ? lr[0] * coeff * pn / (gn + wd * pn) : lr[0];
  OAR_GRID_STRIDE(i, n) {
    const T nv = mu * v[i] + local_lr * (g[i] + wd * p[i]);
    vout[i] = nv;
    pout[i] = p[i] - nv;
  }
}

}  // namespace

template <typename T>
void LarsMomentum(const T* p, const T* g, const T* v, const T* lr, T mu, T coeff, T wd, T* norms, T* pout, T* vout,
                  int64_t n, cudaStream_t s) {
  SquaredNormsKernel<T><<<1, 1024, 0, s>>>(p, g, n, norms);
  if (n > 0) LarsMomentumKernel<T><<<GridFor(n), kThreads, 0, s>>>(p, g, v, lr, norms, mu, coeff, wd, pout, vout, n);
}

template <typename T>
void Adagrad(const T* p, const T* g, const T* mom, const T* lr, T decay, bool decayed, T eps, T* pout, T* mout,
             int64_t n, cudaStream_t s) {
  if (n > 0) AdagradKernel<T><<<GridFor(n), kThreads, 0, s>>>(p, g, mom, lr, decay, decayed, eps, pout, mout, n);
}

template <typename T>
void Adamax(const T* p, const T* g, const T* lr, const T* mom, const T* inf, const T* beta1_pow, T b1, T b2, T eps,
            T* pout, T* mout, T* iout, int64_t n, cudaStream_t s) {
  if (n > 0) {
    AdamaxKernel<T><<<GridFor(n), kThreads, 0, s>>>(p, g, lr, mom, inf, beta1_pow, b1, b2, eps, pout, mout, iout, n);
  }
}

template <typename T>
void Rmsprop(const T* p, const T* g, const T* ms, const T* mom, const T* mg, const T* lr, T rho, T eps, T mu, T* pout,
             T* msout, T* mout, T* mgout, int64_t n, cudaStream_t s) {
  if (n > 0) {
    RmspropKernel<T><<<GridFor(n), kThreads, 0, s>>>(p, g, ms, mom, mg, lr, rho, eps, mu, pout, msout, mout, mgout, n);
  }
}

template <typename T>
void Ftrl(const T* p, const T* g, const T* sq, const T* lin, const T* lr, T l1, T l2, T power, T* pout, T* sqout,
          T* linout, int64_t n, cudaStream_t s) {
  if (n > 0) FtrlKernel<T><<<GridFor(n), kThreads, 0, s>>>(p, g, sq, lin, lr, l1, l2, power, pout, sqout, linout, n);
}

template void LarsMomentum<float>(const float*, const float*, const float*, const float*, float, float, float, float*,
                                  float*, float*, int64_t, cudaStream_t);
template void Adagrad<float>(const float*, const float*, const float*, const float*, float, bool, float, float*, float*,
                             int64_t, cudaStream_t);
template void Adamax<float>(const float*, const float*, const float*, const float*, const float*, const float*, float,
                            float, float, float*, float*, float*, int64_t, cudaStream_t);
template void Rmsprop<float>(const float*, const float*, const float*, const float*, const float*, const float*, float,
                             float, float, float*, float*, float*, float*, int64_t, cudaStream_t);
template void Ftrl<float>(const float*, const float*, const float*, const float*, const float*, float, float, float,
                          float*, float*, float*, int64_t, cudaStream_t);

}  // namespace cuda
}  // namespace oar
