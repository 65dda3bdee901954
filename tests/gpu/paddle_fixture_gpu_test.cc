// The programs PaddlePaddle 2.6 wrote (tests/testdata/paddle/), trained on
// CUDAPlace(0) from Paddle's own initial persistables on its fixed batches:
// the losses match the ones Paddle recorded, step for step (matmul_v2 with a
// shared matrix and vectors, conv2d, batch_norm, transpose2, reshape2,
// lookup_table_v2, cross_entropy2, softmax_with_cross_entropy, reduce_mean,
// reduce_sum, top_k_v2, adagrad, rmsprop, softmax_with_cross_entropy along
// axis 1, fill_constant's str_value, dropout in test mode, ...), and the
// whole models of issue 20 whose CPU-only ops fall back to the host. Needs a
// GPU: each test skips itself, with the reason, on a host without one.
// Labelled `gpu`.
//
// Tolerance: float32 on both sides, but cuBLAS and cuDNN sum in other
// orders than the CPU (gpu_test_util.h), and 20 steps compound that:
// 1e-4 relative (the CPU run matches Paddle to 1e-5).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/device/gpu_info.h"
#include "gtest/gtest.h"
#include "tests/common/paddle/paddle_fixture.h"
#include "tests/gpu/require_gpu.h"

namespace oar {
namespace {

class PaddleFixtureGpuTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PaddleFixtureGpuTest, TrainsToPaddlesOwnLossesOnTheGpu) {
  REQUIRE_GPU();
  const paddle_fixture::Fixture f = paddle_fixture::Load(GetParam());
  ASSERT_TRUE(f.main && f.startup);
  ASSERT_EQ(f.losses.size(), static_cast<size_t>(f.steps));
  const std::vector<double> got = paddle_fixture::Train(GetParam(), f, CUDAPlace(0));
  ASSERT_EQ(got.size(), f.losses.size());
  const size_t exact_steps = paddle_fixture::ExactSteps(GetParam(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = i < exact_steps ? 1e-4 : 1e-2;
    EXPECT_NEAR(got[i], f.losses[i], tol * std::abs(f.losses[i])) << "step " << i;
  }
  const double err =
      paddle_fixture::ReportMaxRelativeError(std::vector<double>(got.begin(), got.begin() + exact_steps),
                                             std::vector<double>(f.losses.begin(), f.losses.begin() + exact_steps));
  std::printf("%s on the GPU: %zu steps, largest relative difference from Paddle's losses %.2e\n", GetParam().c_str(),
              got.size(), err);
}

// Every fixture: the ones whose ops all have GPU kernels, and the ones whose
// layer_norm, rnn, gelu, adamw, nce, ... run their CPU kernels on the host
// (the fallback).
INSTANTIATE_TEST_SUITE_P(Models, PaddleFixtureGpuTest, ::testing::ValuesIn(paddle_fixture::kTrainingFixtures));

}  // namespace
}  // namespace oar
