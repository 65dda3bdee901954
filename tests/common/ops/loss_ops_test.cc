#include <cmath>

#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

Tensor Labels(std::vector<int64_t> v) { return MakeTensor<int64_t>({static_cast<int64_t>(v.size()), 1}, v); }

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

// x[2, 3, 4] with the class axis in the middle: fibre (p, q) holds
// x[p, c, q] for c in 0..2.
float At(const Tensor& t, int p, int c, int q) { return t.data<float>()[(p * 3 + c) * 4 + q]; }

TEST(SoftmaxOpTest, AnyAxisNormalisesItsFibresAndGradientMatches) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({2, 3, 4}, -3, 3, 1));
  ASSERT_TRUE(RunOps({MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"axis", int32_t{1}}})}, &s).ok());
  const Tensor& x = GetTensor(s, "x");
  const Tensor& o = GetTensor(s, "o");
  for (int p = 0; p < 2; ++p) {
    for (int q = 0; q < 4; ++q) {
      float z = 0;
      for (int c = 0; c < 3; ++c) z += std::exp(At(x, p, c, q));
      for (int c = 0; c < 3; ++c) EXPECT_NEAR(At(o, p, c, q), std::exp(At(x, p, c, q)) / z, 1e-6);
    }
  }
  for (int32_t axis : {0, 1, -2}) {
    ExpectGradientsMatch<double>(MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"axis", axis}}),
                                 {{"x", RandomTensor<double>({2, 3, 4}, -3, 3, 2)}}, {"x"});
  }
}

TEST(SoftmaxOpTest, AxisOutsideTheRankIsAnErrorNamingIt) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({3, 5}, -3, 3, 1));
  absl::Status st = RunOps({MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"axis", int32_t{2}}})}, &s);
  EXPECT_NE(st.message().find("axis=2"), std::string::npos) << st;
}

TEST(SoftmaxWithCrossEntropyOpTest, MiddleAxisLossAndGradients) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({2, 3, 4}, -2, 2, 3));
  const std::vector<int64_t> labels = {0, 2, 1, 1, 2, 0, -100, 1};  // [2, 1, 4]; one ignored
  SetTensor(&s, "l", MakeTensor<int64_t>({2, 1, 4}, labels));
  ASSERT_TRUE(RunOps({MakeOp("softmax_with_cross_entropy", {{"Logits", {"x"}}, {"Label", {"l"}}},
                             {{"Softmax", {"sm"}}, {"Loss", {"loss"}}}, {{"axis", int32_t{1}}})},
                     &s)
                  .ok());
  const Tensor& x = GetTensor(s, "x");
  const Tensor& loss = GetTensor(s, "loss");
  EXPECT_EQ(loss.dims(), (DDim{2, 1, 4}));
  for (int p = 0; p < 2; ++p) {
    for (int q = 0; q < 4; ++q) {
      const int64_t l = labels[p * 4 + q];
      float z = 0;
      for (int c = 0; c < 3; ++c) z += std::exp(At(x, p, c, q));
      const float want = l < 0 ? 0.0f : -std::log(std::exp(At(x, p, static_cast<int>(l), q)) / z);
      EXPECT_NEAR(loss.data<float>()[p * 4 + q], want, 1e-5) << p << "," << q;
    }
  }
  ExpectGradientsMatch<double>(
      MakeOp("softmax_with_cross_entropy", {{"Logits", {"x"}}, {"Label", {"l"}}},
             {{"Softmax", {"sm"}}, {"Loss", {"loss"}}}, {{"axis", int32_t{1}}}),
      {{"x", RandomTensor<double>({2, 3, 4}, -2, 2, 4)}, {"l", MakeTensor<int64_t>({2, 1, 4}, labels)}}, {"x"},
      {.loss_outputs = {"loss"}});
  // Soft labels along axis 0 (2 classes), each fibre summing to 1 as the
  // gradient softmax - label assumes.
  Tensor soft = RandomTensor<double>({2, 3, 4}, 0, 1, 6);
  for (int i = 0; i < 12; ++i) soft.data<double>()[12 + i] = 1 - soft.data<double>()[i];
  ExpectGradientsMatch<double>(
      MakeOp("softmax_with_cross_entropy", {{"Logits", {"x"}}, {"Label", {"l"}}},
             {{"Softmax", {"sm"}}, {"Loss", {"loss"}}}, {{"axis", int32_t{0}}, {"soft_label", true}}),
      {{"x", RandomTensor<double>({2, 3, 4}, -2, 2, 5)}, {"l", soft}}, {"x"}, {.loss_outputs = {"loss"}});
}

TEST(SoftmaxWithCrossEntropyOpTest, HardLabelWithClassesOnTheAxisIsRefused) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({2, 3, 4}, -2, 2, 3));
  SetTensor(&s, "l", MakeTensor<int64_t>({2, 3, 4}, std::vector<int64_t>(24, 0)));
  absl::Status st = RunOps({MakeOp("softmax_with_cross_entropy", {{"Logits", {"x"}}, {"Label", {"l"}}},
                                   {{"Softmax", {"sm"}}, {"Loss", {"loss"}}}, {{"axis", int32_t{1}}})},
                           &s);
  EXPECT_NE(st.message().find("must be 1 along the class axis (dimension 1)"), std::string::npos) << st;
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
  ExpectGradientsMatch<double>(MakeOp("cross_entropy", {{"X", {"p"}}, {"Label", {"l"}}}, {{"Y", {"y"}}}),
                               {{"p", RandomTensor<double>({4, 3}, 0.1, 1, 1)}, {"l", Labels({0, 2, 1, 2})}}, {"p"});
  ExpectGradientsMatch<double>(
      MakeOp("cross_entropy", {{"X", {"p"}}, {"Label", {"l"}}}, {{"Y", {"y"}}}, {{"soft_label", true}}),
      {{"p", RandomTensor<double>({2, 3}, 0.1, 1, 1)}, {"l", RandomTensor<double>({2, 3}, 0, 1, 2)}}, {"p"});
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
                     &s)
                  .ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(GetTensor(s, "loss").data<float>()[i], GetTensor(s, "loss2").data<float>()[i], 1e-5);
  }
}

TEST(SoftmaxWithCrossEntropyOpTest, GradientMatches) {
  ExpectGradientsMatch<double>(MakeOp("softmax_with_cross_entropy", {{"Logits", {"x"}}, {"Label", {"l"}}},
                                      {{"Softmax", {"sm"}}, {"Loss", {"loss"}}}),
                               {{"x", RandomTensor<double>({3, 4}, -2, 2, 1)}, {"l", Labels({3, 0, 1})}}, {"x"},
                               {.loss_outputs = {"loss"}});
}

// Fluid's in-place pair for this grad op is Logits@GRAD on Softmax: bound
// so, every gradient equals the one written to a variable of its own, with
// and without the softmax, hard labels (an ignored row too) and soft.
TEST(SoftmaxWithCrossEntropyOpTest, GradientBoundInPlaceOnSoftmaxMatches) {
  // Made afresh for each scope: a buffer shared with another tensor would
  // give the output one of its own, and nothing would be in place.
  const auto probabilities = [] {
    return MakeTensor<float>({3, 4}, {0.1f, 0.2f, 0.3f, 0.4f, 0.25f, 0.25f, 0.25f, 0.25f, 0.7f, 0.1f, 0.1f, 0.1f});
  };
  const Tensor g = MakeTensor<float>({3, 1}, {1.0f, -2.0f, 0.5f});
  for (bool soft : {false, true}) {
    for (bool use_softmax : {false, true}) {
      const Tensor label = soft ? MakeTensor<float>({3, 4}, {0, 0, 1, 0, 0.5f, 0.5f, 0, 0, 0, 0, 0, 1})
                                : MakeTensor<int64_t>({3, 1}, {2, -100, 3});
      auto grad_op = [&](const std::string& dx) {
        return MakeOp("softmax_with_cross_entropy_grad", {{"Label", {"l"}}, {"Softmax", {"p"}}, {"Loss@GRAD", {"g"}}},
                      {{"Logits@GRAD", {dx}}},
                      {{"soft_label", soft}, {"use_softmax", use_softmax}, {"ignore_index", int32_t{-100}}});
      };
      Scope apart, in_place;
      for (Scope* s : {&apart, &in_place}) {
        SetTensor(s, "p", probabilities());
        SetTensor(s, "g", g);
        SetTensor(s, "l", label);
      }
      ASSERT_TRUE(RunOps({grad_op("dx")}, &apart).ok());
      ASSERT_FALSE(GetTensor(in_place, "p").BufferShared());
      ASSERT_TRUE(RunOps({grad_op("p")}, &in_place).ok());
      const std::vector<float> want = TensorToVector<float>(GetTensor(apart, "dx"));
      const std::vector<float> got = TensorToVector<float>(GetTensor(in_place, "p"));
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_FLOAT_EQ(got[i], want[i]) << "soft_label " << soft << ", use_softmax " << use_softmax << ", [" << i
                                         << "]";
      }
    }
  }
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
