#include <cmath>

#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

Tensor Labels(std::vector<int64_t> v) {
  return MakeTensor<int64_t>({static_cast<int64_t>(v.size()), 1}, v);
}

TEST(SoftmaxOpTest, RowsSumToOneAndGradientMatches) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({3, 5}, -3, 3, 1));
  ASSERT_TRUE(RunOps({MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"o"}}})}, &s).ok());
  const Tensor& o = GetTensor(s, "o");
  for (int r = 0; r < 3; ++r) {
    float sum = 0;
    for (int c = 0; c < 5; ++c) sum += o.data<float>()[r * 5 + c];
    EXPECT_NEAR(sum, 1.0f, 1e-6);
  }
  ExpectGradientsMatch<double>(MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"o"}}}),
                               {{"x", RandomTensor<double>({3, 5}, -3, 3, 2)}}, {"x"});
}

TEST(SoftmaxOpTest, RejectsNonLastAxis) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({3, 5}, -3, 3, 1));
  EXPECT_FALSE(RunOps({MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"axis", int32_t{0}}})}, &s).ok());
}

TEST(CrossEntropyOpTest, HardLabelLossIsNegativeLogProbability) {
  Scope s;
  SetTensor(&s, "p", MakeTensor<float>({2, 3}, {0.2f, 0.5f, 0.3f, 0.1f, 0.1f, 0.8f}));
  SetTensor(&s, "l", Labels({1, 2}));
  ASSERT_TRUE(RunOps({MakeOp("cross_entropy", {{"X", {"p"}}, {"Label", {"l"}}}, {{"Y", {"y"}}})}, &s).ok());
  const Tensor& y = GetTensor(s, "y");
  EXPECT_EQ(y.dims(), (DDim{2, 1}));
  EXPECT_NEAR(y.data<float>()[0], -std::log(0.5f), 1e-6);
  EXPECT_NEAR(y.data<float>()[1], -std::log(0.8f), 1e-6);
}

TEST(CrossEntropyOpTest, HardAndSoftGradientsMatch) {
  ExpectGradientsMatch<double>(
      MakeOp("cross_entropy", {{"X", {"p"}}, {"Label", {"l"}}}, {{"Y", {"y"}}}),
      {{"p", RandomTensor<double>({4, 3}, 0.1, 1, 1)}, {"l", Labels({0, 2, 1, 2})}}, {"p"});
  ExpectGradientsMatch<double>(
      MakeOp("cross_entropy", {{"X", {"p"}}, {"Label", {"l"}}}, {{"Y", {"y"}}}, {{"soft_label", true}}),
      {{"p", RandomTensor<double>({2, 3}, 0.1, 1, 1)}, {"l", RandomTensor<double>({2, 3}, 0, 1, 2)}},
      {"p"});
}

TEST(CrossEntropyOpTest, LabelOutOfRangeIsAnErrorNotACrash) {
  Scope s;
  SetTensor(&s, "p", RandomTensor<float>({2, 3}, 0.1, 1, 1));
  SetTensor(&s, "l", Labels({1, 7}));
  absl::Status st = RunOps({MakeOp("cross_entropy", {{"X", {"p"}}, {"Label", {"l"}}}, {{"Y", {"y"}}})}, &s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("label 7"), std::string::npos) << st;
}

TEST(CrossEntropyOpTest, WrongLabelDtypeIsAnError) {
  Scope s;
  SetTensor(&s, "p", RandomTensor<float>({2, 3}, 0.1, 1, 1));
  SetTensor(&s, "l", MakeTensor<int32_t>({2, 1}, {0, 1}));
  absl::Status st = RunOps({MakeOp("cross_entropy", {{"X", {"p"}}, {"Label", {"l"}}}, {{"Y", {"y"}}})}, &s);
  EXPECT_NE(st.message().find("int32"), std::string::npos) << st;
}

TEST(SoftmaxWithCrossEntropyOpTest, MatchesSoftmaxThenCrossEntropy) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({4, 6}, -2, 2, 3));
  SetTensor(&s, "l", Labels({0, 5, 3, 3}));
  ASSERT_TRUE(RunOps({MakeOp("softmax_with_cross_entropy", {{"Logits", {"x"}}, {"Label", {"l"}}},
                             {{"Softmax", {"sm"}}, {"Loss", {"loss"}}}),
                      MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"sm2"}}}),
                      MakeOp("cross_entropy", {{"X", {"sm2"}}, {"Label", {"l"}}}, {{"Y", {"loss2"}}})},
                     &s).ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(GetTensor(s, "loss").data<float>()[i], GetTensor(s, "loss2").data<float>()[i], 1e-5);
  }
}

TEST(SoftmaxWithCrossEntropyOpTest, GradientMatches) {
  ExpectGradientsMatch<double>(
      MakeOp("softmax_with_cross_entropy", {{"Logits", {"x"}}, {"Label", {"l"}}},
             {{"Softmax", {"sm"}}, {"Loss", {"loss"}}}),
      {{"x", RandomTensor<double>({3, 4}, -2, 2, 1)}, {"l", Labels({3, 0, 1})}}, {"x"},
      {.loss_outputs = {"loss"}});
}

TEST(MeanOpTest, AveragesAndGradientMatches) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 2}, {1, 2, 3, 6}));
  ASSERT_TRUE(RunOps({MakeOp("mean", {{"X", {"x"}}}, {{"Out", {"m"}}})}, &s).ok());
  EXPECT_EQ(GetTensor(s, "m").dims(), (DDim{1}));
  EXPECT_FLOAT_EQ(GetTensor(s, "m").data<float>()[0], 3.0f);
  ExpectGradientsMatch<double>(MakeOp("mean", {{"X", {"x"}}}, {{"Out", {"m"}}}),
                               {{"x", RandomTensor<double>({3, 2}, -1, 1, 1)}}, {"x"});
}

}  // namespace
}  // namespace oar::testing
