// The fused rnn op's vectorized activations (common/ops/rnn_activation.h):
// e^x within 2 ulp of the exact value across its whole range, and the
// sigmoid and tanh arrays equal to Paddle's formulas in double, for every
// length (the eight-wide body and each tail), without touching memory past
// the array.
#include <cmath>
#include <limits>
#include <vector>

#include "common/ops/rnn_activation.h"
#include "gtest/gtest.h"

namespace oar::rnn_fused {
namespace {

TEST(RnnActivationTest, ExpIsWithinTwoUlpOverItsRange) {
  double worst = 0;
  float at = 0;
  for (float x = -87.0f; x <= 87.9f; x += 0.000731f * std::max(1.0f, std::fabs(x))) {
    const double exact = std::exp(static_cast<double>(x));
    const double ulp =
        std::nextafter(static_cast<float>(exact), std::numeric_limits<float>::infinity()) - static_cast<float>(exact);
    const double err = std::fabs(ExpF(x) - exact) / ulp;
    if (err > worst) worst = err, at = x;
  }
  EXPECT_LE(worst, 2.0) << "at x = " << at;
  EXPECT_EQ(ExpF(0.0f), 1.0f);
  EXPECT_EQ(ExpF(1000.0f), ExpF(88.0f));  // clamped, never inf
  EXPECT_EQ(ExpF(-1000.0f), ExpF(-87.0f));
  EXPECT_GT(ExpF(-1000.0f), 0.0f);
}

std::vector<float> Inputs(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = (static_cast<float>(i % 23) - 11.0f) * 0.93f + 0.01f * static_cast<float>(i);
  if (n > 2) x[1] = -1e30f, x[2] = 1e30f;  // past both clips
  return x;
}

TEST(RnnActivationTest, SigmoidAndTanhMatchPaddlesFormulasAtEveryLength) {
  for (size_t n : {0, 1, 3, 7, 8, 9, 16, 23, 100}) {
    const std::vector<float> x = Inputs(n);
    std::vector<float> s = x, t = x;
    s.push_back(123.0f), t.push_back(123.0f);  // a sentinel past the end
    SigmoidInPlace(s.data(), static_cast<int64_t>(n));
    TanhInPlace(t.data(), static_cast<int64_t>(n));
    EXPECT_EQ(s[n], 123.0f) << n;
    EXPECT_EQ(t[n], 123.0f) << n;
    for (size_t i = 0; i < n; ++i) {
      const double v = x[i];
      const double sig = 1 / (1 + std::exp(-std::clamp(v, -40.0, 13.0)));
      const double th = 2 / (1 + std::exp(std::min(-2 * v, 40.0))) - 1;
      EXPECT_NEAR(s[i], sig, 2e-7 * sig) << "sigmoid(" << v << "), n = " << n;
      EXPECT_NEAR(t[i], th, 2e-7) << "tanh(" << v << "), n = " << n;
    }
  }
}

TEST(RnnActivationTest, DoubleVersionsAreTheFormulas) {
  std::vector<double> s{-50, -1, 0, 0.5, 20}, t = s;
  SigmoidInPlace(s.data(), 5);
  TanhInPlace(t.data(), 5);
  EXPECT_DOUBLE_EQ(s[0], 1 / (1 + std::exp(40.0)));  // clipped at -40
  EXPECT_DOUBLE_EQ(s[3], 1 / (1 + std::exp(-0.5)));
  EXPECT_DOUBLE_EQ(s[4], 1 / (1 + std::exp(-13.0)));  // clipped at 13
  EXPECT_DOUBLE_EQ(t[1], 2 / (1 + std::exp(2.0)) - 1);
  EXPECT_DOUBLE_EQ(t[2], 0.0);
}

}  // namespace
}  // namespace oar::rnn_fused
