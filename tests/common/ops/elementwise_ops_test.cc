#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

TEST(ElementwiseAddTest, BroadcastsBiasAtAxis) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  SetTensor(&s, "b", MakeTensor<float>({3}, {10, 20, 30}));
  ASSERT_TRUE(
      RunOps({MakeOp("elementwise_add", {{"X", {"x"}}, {"Y", {"b"}}}, {{"Out", {"o"}}}, {{"axis", int32_t{1}}})}, &s)
          .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "o")), (std::vector<float>{11, 22, 33, 14, 25, 36}));
}

TEST(ElementwiseAddTest, BroadcastsMiddleAxisWithTrailingOnes) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 2, 2}, {0, 0, 0, 0, 0, 0, 0, 0}));
  SetTensor(&s, "y", MakeTensor<float>({2, 1}, {1, 2}));
  ASSERT_TRUE(
      RunOps({MakeOp("elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}, {{"axis", int32_t{1}}})}, &s)
          .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "o")), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2}));
}

TEST(ElementwiseAddTest, RejectsIncompatibleShapes) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({2, 3}, -1, 1, 1));
  SetTensor(&s, "y", RandomTensor<float>({4}, -1, 1, 2));
  absl::Status st = RunOps({MakeOp("elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}})}, &s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("elementwise_add"), std::string::npos) << st;
}

class ElementwiseGradTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ElementwiseGradTest, SameShapeGradientMatches) {
  OpDesc op = MakeOp(GetParam(), {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}});
  ExpectGradientsMatch<double>(
      op, {{"x", RandomTensor<double>({3, 4}, 0.5, 2, 1)}, {"y", RandomTensor<double>({3, 4}, 0.5, 2, 2)}}, {"x", "y"});
}

TEST_P(ElementwiseGradTest, BroadcastGradientMatches) {
  OpDesc op = MakeOp(GetParam(), {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}, {{"axis", int32_t{1}}});
  ExpectGradientsMatch<double>(
      op, {{"x", RandomTensor<double>({2, 3, 4}, 0.5, 2, 1)}, {"y", RandomTensor<double>({3}, 0.5, 2, 2)}}, {"x", "y"});
}

TEST_P(ElementwiseGradTest, Fp32GradientMatches) {
  OpDesc op = MakeOp(GetParam(), {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}});
  ExpectGradientsMatch<float>(
      op, {{"x", RandomTensor<float>({2, 4}, 0.5, 2, 1)}, {"y", RandomTensor<float>({4}, 0.5, 2, 2)}}, {"x", "y"},
      {.eps = 1e-2, .tolerance = 2e-3});
}

INSTANTIATE_TEST_SUITE_P(Ops, ElementwiseGradTest,
                         ::testing::Values("elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div"));

}  // namespace
}  // namespace oar::testing
