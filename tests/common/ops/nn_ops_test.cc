// batch_norm and dropout.
#include <cmath>

#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

OpDesc BatchNorm(bool is_test) {
  return MakeOp("batch_norm",
                {{"X", {"x"}}, {"Scale", {"scale"}}, {"Bias", {"bias"}}, {"Mean", {"mean"}}, {"Variance", {"var"}}},
                {{"Y", {"y"}},
                 {"MeanOut", {"mean"}},
                 {"VarianceOut", {"var"}},
                 {"SavedMean", {"saved_mean"}},
                 {"SavedVariance", {"saved_var"}}},
                {{"is_test", is_test}, {"momentum", 0.9f}, {"epsilon", 1e-5f}});
}

template <typename T>
std::map<std::string, Tensor> BatchNormInputs() {
  return {{"x", RandomTensor<T>({3, 2, 2, 2}, -2, 2, 1)},
          {"scale", RandomTensor<T>({2}, 0.5, 1.5, 2)},
          {"bias", RandomTensor<T>({2}, -1, 1, 3)},
          {"mean", MakeTensor<T>({2}, {0.5, -0.5})},
          {"var", MakeTensor<T>({2}, {1.0, 2.0})}};
}

TEST(BatchNormOpTest, NormalizesPerChannelAndUpdatesRunningStats) {
  Scope s;
  for (auto& [n, t] : BatchNormInputs<float>()) SetTensor(&s, n, t);
  SetTensor(&s, "scale", MakeTensor<float>({2}, {1, 1}));
  SetTensor(&s, "bias", MakeTensor<float>({2}, {0, 0}));
  std::vector<float> x = TensorToVector<float>(GetTensor(s, "x"));
  ASSERT_TRUE(RunOps({BatchNorm(false)}, &s).ok());
  const Tensor& y = GetTensor(s, "y");
  for (int c = 0; c < 2; ++c) {
    double m = 0, v = 0, bm = 0;
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 4; ++i) {
        m += y.data<float>()[(n * 2 + c) * 4 + i];
        bm += x[(n * 2 + c) * 4 + i];
      }
    m /= 12;
    bm /= 12;
    for (int n = 0; n < 3; ++n)
      for (int i = 0; i < 4; ++i) v += std::pow(y.data<float>()[(n * 2 + c) * 4 + i] - m, 2);
    EXPECT_NEAR(m, 0.0, 1e-5);
    EXPECT_NEAR(v / 12, 1.0, 1e-3);
    EXPECT_NEAR(GetTensor(s, "mean").data<float>()[c], 0.9 * (c == 0 ? 0.5 : -0.5) + 0.1 * bm, 1e-5);
  }
}

TEST(BatchNormOpTest, TrainingGradientMatches) {
  ExpectGradientsMatch<double>(BatchNorm(false), BatchNormInputs<double>(), {"x", "scale", "bias"},
                               {.loss_outputs = {"y"}});
}

TEST(BatchNormOpTest, TestModeUsesRunningStatistics) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({1, 1, 1, 2}, {1.5f, 2.5f}));
  SetTensor(&s, "scale", MakeTensor<float>({1}, {2}));
  SetTensor(&s, "bias", MakeTensor<float>({1}, {1}));
  SetTensor(&s, "mean", MakeTensor<float>({1}, {0.5f}));
  SetTensor(&s, "var", MakeTensor<float>({1}, {4}));
  ASSERT_TRUE(RunOps({BatchNorm(true)}, &s).ok());
  EXPECT_NEAR(GetTensor(s, "y").data<float>()[0], 2 * (1.0 / std::sqrt(4 + 1e-5)) + 1, 1e-5);
  EXPECT_EQ(GetTensor(s, "mean").data<float>()[0], 0.5f);  // untouched
}

TEST(BatchNormOpTest, WrongScaleShapeIsAnError) {
  Scope s;
  for (auto& [n, t] : BatchNormInputs<float>()) SetTensor(&s, n, t);
  SetTensor(&s, "scale", MakeTensor<float>({3}, {1, 1, 1}));
  EXPECT_NE(RunOps({BatchNorm(false)}, &s).message().find("Scale[3] must be [2]"), std::string::npos);
}

OpDesc Dropout(const std::string& impl, bool is_test) {
  return MakeOp("dropout", {{"X", {"x"}}}, {{"Out", {"y"}}, {"Mask", {"mask"}}},
                {{"dropout_prob", 0.3f},
                 {"fix_seed", true},
                 {"seed", int32_t{11}},
                 {"is_test", is_test},
                 {"dropout_implementation", impl}});
}

class DropoutTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DropoutTest, TrainDropsAboutPAndTestScales) {
  const bool upscale = GetParam() == "upscale_in_train";
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({10000}, std::vector<float>(10000, 2.0f)));
  ASSERT_TRUE(RunOps({Dropout(GetParam(), false)}, &s).ok());
  std::vector<float> y = TensorToVector<float>(GetTensor(s, "y"));
  int dropped = 0;
  for (float v : y) {
    if (v == 0)
      ++dropped;
    else
      EXPECT_NEAR(v, upscale ? 2.0f / 0.7f : 2.0f, 1e-5);
  }
  EXPECT_NEAR(dropped / 10000.0, 0.3, 0.02);
  ASSERT_TRUE(RunOps({Dropout(GetParam(), true)}, &s).ok());
  EXPECT_NEAR(GetTensor(s, "y").data<float>()[0], upscale ? 2.0f : 2.0f * 0.7f, 1e-6);
}

TEST_P(DropoutTest, GradientMatchesWithFixedSeed) {
  ExpectGradientsMatch<double>(Dropout(GetParam(), false), {{"x", RandomTensor<double>({4, 5}, -1, 1, 1)}}, {"x"},
                               {.loss_outputs = {"y"}});
}

INSTANTIATE_TEST_SUITE_P(Impl, DropoutTest, ::testing::Values("downgrade_in_infer", "upscale_in_train"));

TEST(DropoutOpTest, ProbabilityOutOfRangeIsAnError) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2}, {1, 2}));
  EXPECT_FALSE(RunOps({MakeOp("dropout", {{"X", {"x"}}}, {{"Out", {"y"}}}, {{"dropout_prob", 1.5f}})}, &s).ok());
}

}  // namespace
}  // namespace oar::testing
