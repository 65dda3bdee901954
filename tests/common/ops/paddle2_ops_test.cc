// The op families Paddle 2.x models are made of (issue 20): attribute
// activations, layer_norm, sigmoid_cross_entropy_with_logits, slice, shape,
// range, fill_any_like, squared_l2_norm, adamw, numpy broadcasting in the
// elementwise ops, and Fluid 1.3-1.6's elementwise grads without X. Values
// against formulas written out here, gradients against central differences.
#include <cmath>

#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

struct ActCase {
  std::string type;
  std::map<std::string, Attribute> attrs;
  double (*f)(double);  // the forward at the attributes given
};

class AttrActivationTest : public ::testing::TestWithParam<ActCase> {};

TEST_P(AttrActivationTest, ValuesAndGradientsMatch) {
  const ActCase& c = GetParam();
  Tensor x = RandomTensor<double>({3, 4}, 0.15, 2.5, 3);
  for (int64_t i = 0; i < x.numel(); i += 2) x.data<double>()[i] *= -1;  // both signs, off the kinks
  if (c.type == "log" || c.type == "rsqrt" || c.type == "pow") {
    for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] = std::abs(x.data<double>()[i]);
  }
  OpDesc op = MakeOp(c.type, {{"X", {"x"}}}, {{"Out", {"o"}}}, c.attrs);
  Scope s;
  SetTensor(&s, "x", x);
  ASSERT_TRUE(RunOps({op}, &s).ok());
  for (int64_t i = 0; i < x.numel(); ++i) {
    EXPECT_NEAR(GetTensor(s, "o").data<double>()[i], c.f(x.data<double>()[i]), 1e-12) << c.type << " at " << i;
  }
  ExpectGradientsMatch<double>(op, {{"x", x}}, {"x"});
}

INSTANTIATE_TEST_SUITE_P(
    Ops, AttrActivationTest,
    ::testing::Values(
        ActCase{"gelu", {}, +[](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
        ActCase{"gelu",
                {{"approximate", true}},
                +[](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }},
        ActCase{"leaky_relu", {{"alpha", 0.1f}}, +[](double x) { return x > 0 ? x : 0.1f * x; }},
        ActCase{"elu", {{"alpha", 0.5f}}, +[](double x) { return x > 0 ? x : 0.5 * (std::exp(x) - 1); }},
        ActCase{"relu6", {{"threshold", 2.0f}}, +[](double x) { return std::min(std::max(x, 0.0), 2.0); }},
        ActCase{"softplus",
                {{"beta", 2.0f}, {"threshold", 20.0f}},
                +[](double x) { return std::log1p(std::exp(2 * x)) / 2; }},
        ActCase{"silu", {}, +[](double x) { return x / (1 + std::exp(-x)); }},
        ActCase{"swish", {{"beta", 1.5f}}, +[](double x) { return x / (1 + std::exp(-1.5 * x)); }},
        ActCase{"hard_swish", {}, +[](double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; }},
        ActCase{"log", {}, +[](double x) { return std::log(x); }},
        ActCase{"rsqrt", {}, +[](double x) { return 1 / std::sqrt(x); }},
        ActCase{"pow", {{"factor", 3.0f}}, +[](double x) { return x * x * x; }}),
    [](const ::testing::TestParamInfo<ActCase>& i) {
      return i.param.type + (i.param.attrs.count("approximate") ? "_tanh" : "");
    });

TEST(LayerNormTest, NormalizesEachRowAndItsGradientsMatch) {
  Tensor x = RandomTensor<double>({2, 3, 4}, -2, 2, 4);
  Tensor scale = RandomTensor<double>({12}, 0.5, 1.5, 5), bias = RandomTensor<double>({12}, -1, 1, 6);
  OpDesc op = MakeOp("layer_norm", {{"X", {"x"}}, {"Scale", {"s"}}, {"Bias", {"b"}}},
                     {{"Y", {"y"}}, {"Mean", {"m"}}, {"Variance", {"v"}}}, {{"begin_norm_axis", int32_t{1}}});
  Scope s;
  SetTensor(&s, "x", x);
  SetTensor(&s, "s", scale);
  SetTensor(&s, "b", bias);
  ASSERT_TRUE(RunOps({op}, &s).ok());
  const double* xp = x.data<double>();
  for (int r = 0; r < 2; ++r) {
    double m = 0, v = 0;
    for (int j = 0; j < 12; ++j) m += xp[r * 12 + j] / 12;
    for (int j = 0; j < 12; ++j) v += (xp[r * 12 + j] - m) * (xp[r * 12 + j] - m) / 12;
    EXPECT_NEAR(GetTensor(s, "m").data<double>()[r], m, 1e-12);
    EXPECT_NEAR(GetTensor(s, "v").data<double>()[r], v, 1e-12);
    for (int j = 0; j < 12; ++j) {
      const double want = (xp[r * 12 + j] - m) / std::sqrt(v + 1e-5) * scale.data<double>()[j] + bias.data<double>()[j];
      EXPECT_NEAR(GetTensor(s, "y").data<double>()[r * 12 + j], want, 1e-9);
    }
  }
  ExpectGradientsMatch<double>(op, {{"x", x}, {"s", scale}, {"b", bias}}, {"x", "s", "b"}, {.loss_outputs = {"y"}});
  // begin_norm_axis 2: rows of 4, no Scale or Bias.
  OpDesc plain = MakeOp("layer_norm", {{"X", {"x"}}}, {{"Y", {"y"}}, {"Mean", {"m"}}, {"Variance", {"v"}}},
                        {{"begin_norm_axis", int32_t{2}}});
  ExpectGradientsMatch<double>(plain, {{"x", x}}, {"x"}, {.loss_outputs = {"y"}});
}

TEST(SigmoidCrossEntropyTest, ValuesIgnoreIndexNormalizeAndGradient) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<double>({4}, {-2, 0.5, 3, 1}));
  SetTensor(&s, "l", MakeTensor<double>({4}, {0, 1, -100, 1}));
  OpDesc op = MakeOp("sigmoid_cross_entropy_with_logits", {{"X", {"x"}}, {"Label", {"l"}}}, {{"Out", {"o"}}},
                     {{"normalize", true}});
  ASSERT_TRUE(RunOps({op}, &s).ok());
  auto bce = [](double x, double z) { return std::max(x, 0.0) - x * z + std::log1p(std::exp(-std::abs(x))); };
  const std::vector<double> want = {bce(-2, 0) / 3, bce(0.5, 1) / 3, 0, bce(1, 1) / 3};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(GetTensor(s, "o").data<double>()[i], want[i], 1e-12) << i;
  ExpectGradientsMatch<double>(op, {{"x", GetTensor(s, "x")}, {"l", GetTensor(s, "l")}}, {"x"},
                               {.loss_outputs = {"o"}});
}

TEST(SliceTest, PythonBoundsDecreaseAxisAndGradient) {
  Scope s;
  Tensor x = RandomTensor<double>({3, 4, 5}, -1, 1, 7);
  SetTensor(&s, "x", x);
  // x[:, 1:-1, -2:] and x[:, 0] (decrease_axis 1)
  ASSERT_TRUE(RunOps({MakeOp("slice", {{"Input", {"x"}}, {"StartsTensorList", {}}}, {{"Out", {"a"}}},
                             {{"axes", std::vector<int32_t>{1, 2}},
                              {"starts", std::vector<int32_t>{1, -2}},
                              {"ends", std::vector<int32_t>{-1, 100}}}),
                      MakeOp("slice", {{"Input", {"x"}}}, {{"Out", {"b"}}},
                             {{"axes", std::vector<int32_t>{1}},
                              {"starts", std::vector<int32_t>{0}},
                              {"ends", std::vector<int32_t>{1}},
                              {"decrease_axis", std::vector<int32_t>{1}}})},
                     &s)
                  .ok());
  EXPECT_EQ(GetTensor(s, "a").dims(), (DDim{3, 2, 2}));
  EXPECT_EQ(GetTensor(s, "b").dims(), (DDim{3, 5}));
  const double* xp = x.data<double>();
  EXPECT_EQ(GetTensor(s, "a").data<double>()[0], xp[1 * 5 + 3]);            // x[0][1][3]
  EXPECT_EQ(GetTensor(s, "a").data<double>()[11], xp[2 * 20 + 2 * 5 + 4]);  // x[2][2][4]
  EXPECT_EQ(GetTensor(s, "b").data<double>()[7], xp[1 * 20 + 2]);           // x[1][0][2]
  ExpectGradientsMatch<double>(MakeOp("slice", {{"Input", {"x"}}}, {{"Out", {"a"}}},
                                      {{"axes", std::vector<int32_t>{1, 2}},
                                       {"starts", std::vector<int32_t>{1, -2}},
                                       {"ends", std::vector<int32_t>{-1, 100}}}),
                               {{"x", x}}, {"x"});
}

TEST(ShapeRangeFillTest, ComputeWhatPaddleDoes) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({2, 3, 4}, -1, 1, 8));
  SetTensor(&s, "start", MakeTensor<int64_t>({1}, {2}));
  SetTensor(&s, "end", MakeTensor<int64_t>({1}, {11}));
  SetTensor(&s, "step", MakeTensor<int64_t>({1}, {3}));
  ASSERT_TRUE(RunOps({MakeOp("shape", {{"Input", {"x"}}}, {{"Out", {"sh"}}}),
                      MakeOp("range", {{"Start", {"start"}}, {"End", {"end"}}, {"Step", {"step"}}}, {{"Out", {"r"}}}),
                      MakeOp("fill_any_like", {{"X", {"x"}}}, {{"Out", {"f"}}}, {{"value", 2.5f}})},
                     &s)
                  .ok());
  EXPECT_EQ(TensorToVector<int32_t>(GetTensor(s, "sh")), (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(TensorToVector<int64_t>(GetTensor(s, "r")), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(GetTensor(s, "f").dims(), (DDim{2, 3, 4}));
  EXPECT_EQ(GetTensor(s, "f").data<float>()[23], 2.5f);
}

TEST(SquaredL2NormTest, SumOfSquaresAndGradient) {
  Tensor x = RandomTensor<double>({3, 2}, -1, 1, 9);
  OpDesc op = MakeOp("squared_l2_norm", {{"X", {"x"}}}, {{"Out", {"o"}}});
  Scope s;
  SetTensor(&s, "x", x);
  ASSERT_TRUE(RunOps({op}, &s).ok());
  double want = 0;
  for (int i = 0; i < 6; ++i) want += x.data<double>()[i] * x.data<double>()[i];
  EXPECT_NEAR(GetTensor(s, "o").data<double>()[0], want, 1e-12);
  ExpectGradientsMatch<double>(op, {{"x", x}}, {"x"});
}

// adamw: the parameter decays by lr·lr_ratio·coeff, then takes adam's step
// at lr·lr_ratio (Paddle's kernel), written out for one element.
TEST(AdamWTest, DecaysThenStepsAsPaddle) {
  Scope s;
  SetTensor(&s, "p", MakeTensor<double>({2}, {1.0, -2.0}));
  SetTensor(&s, "g", MakeTensor<double>({2}, {0.5, 0.25}));
  SetTensor(&s, "lr", MakeTensor<double>({1}, {0.1}));
  SetTensor(&s, "m1", MakeTensor<double>({2}, {0.1, 0.0}));
  SetTensor(&s, "m2", MakeTensor<double>({2}, {0.01, 0.0}));
  SetTensor(&s, "b1p", MakeTensor<double>({1}, {0.81}));
  SetTensor(&s, "b2p", MakeTensor<double>({1}, {0.998}));
  ASSERT_TRUE(RunOps({MakeOp("adamw",
                             {{"Param", {"p"}},
                              {"Grad", {"g"}},
                              {"LearningRate", {"lr"}},
                              {"Moment1", {"m1"}},
                              {"Moment2", {"m2"}},
                              {"Beta1Pow", {"b1p"}},
                              {"Beta2Pow", {"b2p"}}},
                             {{"ParamOut", {"p"}}, {"Moment1Out", {"m1"}}, {"Moment2Out", {"m2"}}},
                             {{"coeff", 0.01f}, {"lr_ratio", 0.5f}, {"with_decay", true}})},
                     &s)
                  .ok());
  const double b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, coeff = 0.01f, ratio = 0.5f;  // float attributes
  const double lr = 0.1 * ratio, p0 = 1.0 * (1 - lr * coeff), m1 = b1 * 0.1 + (1 - b1) * 0.5,
               m2 = b2 * 0.01 + (1 - b2) * 0.25;
  const double lr_t = lr * std::sqrt(1 - 0.998) / (1 - 0.81);
  const double want = p0 - lr_t * m1 / (std::sqrt(m2) + eps * std::sqrt(1 - 0.998));
  EXPECT_NEAR(GetTensor(s, "p").data<double>()[0], want, 1e-12);
}

// Paddle 2.x broadcasts numpy's way: X may be the side that stretches.
TEST(NumpyBroadcastTest, EitherSideStretchesAndEachGradientSumsItsStretch) {
  Tensor x = RandomTensor<double>({1, 3, 4}, -1, 1, 10), y = RandomTensor<double>({2, 3, 1}, -1, 1, 11);
  for (const char* type : {"elementwise_add", "elementwise_mul", "elementwise_sub", "elementwise_div"}) {
    OpDesc op = MakeOp(type, {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}});
    Scope s;
    SetTensor(&s, "x", x);
    SetTensor(&s, "y", y);
    ASSERT_TRUE(RunOps({op}, &s).ok()) << type;
    ASSERT_EQ(GetTensor(s, "o").dims(), (DDim{2, 3, 4})) << type;
    const double xv = x.data<double>()[2 * 4 + 3], yv = y.data<double>()[3 + 2];  // o[1][2][3]
    const double got = GetTensor(s, "o").data<double>()[12 + 2 * 4 + 3];
    const double want = std::string(type) == "elementwise_add"   ? xv + yv
                        : std::string(type) == "elementwise_mul" ? xv * yv
                        : std::string(type) == "elementwise_sub" ? xv - yv
                                                                 : xv / yv;
    EXPECT_NEAR(got, want, 1e-12) << type;
    ExpectGradientsMatch<double>(op, {{"x", x}, {"y", y}}, {"x", "y"});
  }
  Scope s;
  SetTensor(&s, "x", x);
  SetTensor(&s, "y", RandomTensor<double>({2, 2, 1}, -1, 1, 12));
  absl::Status st = RunOps({MakeOp("elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}})}, &s);
  EXPECT_FALSE(st.ok());
}

// Fluid 1.3-1.6 give elementwise_add_grad and _sub_grad no X (and _div_grad
// no X in 1.5-1.6): X's shape is Out@GRAD's; the gradients are the same.
TEST(FluidElementwiseGradTest, AddSubDivGradsWithoutXMatchThoseWithIt) {
  Tensor x = RandomTensor<double>({2, 3}, 0.5, 1.5, 13), y = RandomTensor<double>({3}, 0.5, 1.5, 14);
  Tensor g = RandomTensor<double>({2, 3}, -1, 1, 15);
  for (const std::string type : {"elementwise_add", "elementwise_sub", "elementwise_div"}) {
    Scope s;
    SetTensor(&s, "x", x);
    SetTensor(&s, "y", y);
    SetTensor(&s, "g", g);
    ASSERT_TRUE(RunOps({MakeOp(type, {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}})}, &s).ok());
    const std::map<std::string, std::vector<std::string>> out = {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}};
    ASSERT_TRUE(
        RunOps({MakeOp(type + "_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out", {"o"}}, {"Out@GRAD", {"g"}}}, out)}, &s)
            .ok());
    const std::vector<double> dx = TensorToVector<double>(GetTensor(s, "dx")),
                              dy = TensorToVector<double>(GetTensor(s, "dy"));
    ASSERT_TRUE(RunOps({MakeOp(type + "_grad", {{"Y", {"y"}}, {"Out", {"o"}}, {"Out@GRAD", {"g"}}}, out)}, &s).ok())
        << type;
    EXPECT_EQ(TensorToVector<double>(GetTensor(s, "dx")), dx) << type;
    EXPECT_EQ(TensorToVector<double>(GetTensor(s, "dy")), dy) << type;
  }
  // mul's gradient needs X's values: without it, an error naming the slot.
  Scope s;
  SetTensor(&s, "y", y);
  SetTensor(&s, "g", g);
  absl::Status st =
      RunOps({MakeOp("elementwise_mul_grad", {{"Y", {"y"}}, {"Out@GRAD", {"g"}}}, {{"Y@GRAD", {"dy"}}})}, &s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("X"), std::string::npos) << st;
}

}  // namespace
}  // namespace oar::testing
