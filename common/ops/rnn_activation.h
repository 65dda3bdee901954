// The activations of Paddle's CPU rnn kernels over whole arrays, for the
// fused `rnn` op (rnn_forward.h, rnn_op.cc): the sigmoid of the input
// clipped to [-40, 13] and tanh as 2/(1 + e^(min(-2x, 40))) − 1 (phi's
// detail/activation_functions.h formulas). The float versions evaluate e^x
// by range reduction and a polynomial in a loop the compiler vectorizes, in
// a clone for AVX2 (common/base/cpu_clones.h): an LSTM step spends a third of its
// time in these exponentials, and libm's expf is called one value at a time.
// ExpF is within 2 ulp of e^x (tests/common/ops/rnn_activation_test.cc);
// the double versions call std::exp.
//
// Thread-safety: stateless functions.
#pragma once

#include <cstdint>

namespace oar::rnn_fused {

// e^x for float x, clamped to [-87, 88] first (no overflow, no denormals).
float ExpF(float x);

// p[i] = sigmoid(p[i]) / tanh(p[i]) in place, for i < n.
void SigmoidInPlace(float* p, int64_t n);
void SigmoidInPlace(double* p, int64_t n);
void TanhInPlace(float* p, int64_t n);
void TanhInPlace(double* p, int64_t n);

}  // namespace oar::rnn_fused
