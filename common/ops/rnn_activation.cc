// Paddle's rnn activations over arrays; see rnn_activation.h.
//
// Written with GCC's vector extensions (clang has them too), eight floats
// at a time: the clone for AVX2 runs each operation as one instruction, the
// baseline clone as two SSE ones. Left to the auto-vectorizer, the same
// loop was vectorized in one clone and not the other depending on how the
// clamps were written.
//
// Thread-safety: stateless functions.
#include "common/ops/rnn_activation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/base/cpu_clones.h"

namespace oar::rnn_fused {
namespace {

// Eight floats; helpers take them by reference (a vector argument or return
// value would change the ABI between the clones, and GCC says so).
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));

// x = mask ? a : b, lane by lane (mask lanes are all ones or all zeros).
inline void Select(F8& x, const I8& mask, const F8& a, const F8& b) {
  x = reinterpret_cast<F8>((reinterpret_cast<I8>(a) & mask) | (reinterpret_cast<I8>(b) & ~mask));
}

// x = min(max(x, lo), hi).
inline void Clamp(F8& x, float lo, float hi) {
  const F8 l = F8{} + lo, h = F8{} + hi;
  Select(x, x > l, x, l);
  Select(x, x < h, x, h);
}

// x = e^x: 2^n · e^r with n = floor(x / ln 2 + 1/2) and r = x − n·ln 2 (ln 2
// in two parts, so r is exact), e^r ≈ 1 + r + r²·P(r) with Cephes' expf
// coefficients, and 2^n written into the exponent bits.
inline void Exp8(F8& x) {
  Clamp(x, -87.0f, 88.0f);
  const F8 t = x * 1.44269504088896341f + 0.5f;
  F8 n = __builtin_convertvector(__builtin_convertvector(t, I8), F8);
  n += reinterpret_cast<F8>(reinterpret_cast<I8>(F8{} - 1.0f) & (n > t));  // floor, where conversion truncated
  const F8 r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  F8 p = F8{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  x = (p * (r * r) + r + 1.0f) * reinterpret_cast<F8>((__builtin_convertvector(n, I8) + 127) << 23);
}

inline void Sigmoid8(F8& v) {
  Clamp(v, -40.0f, 13.0f);
  v = -v;
  Exp8(v);
  v = 1.0f / (1.0f + v);
}

inline void Tanh8(F8& v) {
  v = -2.0f * v;
  Clamp(v, -std::numeric_limits<float>::infinity(), 40.0f);
  Exp8(v);
  v = 2.0f / (1.0f + v) - 1.0f;
}

// f over p[0, n), eight at a time; the tail through a zero-padded block.
template <void (*f)(F8&)>
inline void Apply(float* p, int64_t n) {
  int64_t i = 0;
  F8 v;
  for (; i + 8 <= n; i += 8) {
    std::memcpy(&v, p + i, sizeof v);
    f(v);
    std::memcpy(p + i, &v, sizeof v);
  }
  if (i < n) {
    v = F8{};
    std::memcpy(&v, p + i, static_cast<size_t>(n - i) * sizeof(float));
    f(v);
    std::memcpy(p + i, &v, static_cast<size_t>(n - i) * sizeof(float));
  }
}

}  // namespace

float ExpF(float x) {
  F8 v = F8{} + x;
  Exp8(v);
  return v[0];
}

OAR_AVX2_CLONES void SigmoidInPlace(float* p, int64_t n) { Apply<Sigmoid8>(p, n); }
OAR_AVX2_CLONES void TanhInPlace(float* p, int64_t n) { Apply<Tanh8>(p, n); }

void SigmoidInPlace(double* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = 1.0 / (1.0 + std::exp(-std::clamp(p[i], -40.0, 13.0)));
}

void TanhInPlace(double* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = 2.0 / (1.0 + std::exp(std::min(-2.0 * p[i], 40.0))) - 1.0;
}

}  // namespace oar::rnn_fused
