#include <cmath>

#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

TEST(ActivationOpsTest, ComputeExpectedValues) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({4}, {-2, -0.5f, 0.5f, 2}));
  ASSERT_TRUE(
      RunOps({MakeOp("relu", {{"X", {"x"}}}, {{"Out", {"r"}}}), MakeOp("sigmoid", {{"X", {"x"}}}, {{"Out", {"s"}}}),
              MakeOp("tanh", {{"X", {"x"}}}, {{"Out", {"t"}}}), MakeOp("square", {{"X", {"x"}}}, {{"Out", {"q"}}})},
             &s)
          .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "r")), (std::vector<float>{0, 0, 0.5f, 2}));
  EXPECT_NEAR(GetTensor(s, "s").data<float>()[3], 1 / (1 + std::exp(-2.f)), 1e-6);
  EXPECT_NEAR(GetTensor(s, "t").data<float>()[0], std::tanh(-2.f), 1e-6);
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "q")), (std::vector<float>{4, 0.25f, 0.25f, 4}));
}

class ActivationGradTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ActivationGradTest, GradientMatchesNumeric) {
  OpDesc op = MakeOp(GetParam(), {{"X", {"x"}}}, {{"Out", {"o"}}});
  // Values kept away from relu's kink at 0.
  Tensor x = RandomTensor<double>({3, 5}, 0.1, 2, 1);
  for (int64_t i = 0; i < x.numel(); i += 2) x.data<double>()[i] *= -1;
  ExpectGradientsMatch<double>(op, {{"x", x}}, {"x"});
  Tensor xf = RandomTensor<float>({2, 3}, 0.1, 1, 2);
  ExpectGradientsMatch<float>(op, {{"x", xf}}, {"x"}, {.eps = 1e-2, .tolerance = 2e-3});
}

INSTANTIATE_TEST_SUITE_P(Ops, ActivationGradTest, ::testing::Values("relu", "sigmoid", "tanh", "square"));

TEST(ActivationOpsTest, MissingInputIsAClearError) {
  Scope s;
  absl::Status st = RunOps({MakeOp("relu", {{"X", {"nope"}}}, {{"Out", {"o"}}})}, &s);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("'nope'"), std::string::npos) << st;
}

}  // namespace
}  // namespace oar::testing
