// gather, stack, expand_v2, tile, where, cumsum, arg_max/arg_min,
// one_hot_v2, label_smooth and reduce_max/min/prod: values against what
// Paddle's documentation defines, gradients against central differences.
#include <cmath>

#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

TEST(GatherTest, PicksAlongAnAxisAndScattersBackTheGradient) {
  Scope s;
  Tensor x = RandomTensor<double>({3, 4, 2}, -1, 1, 1);
  SetTensor(&s, "x", x);
  SetTensor(&s, "i", MakeTensor<int64_t>({3}, {3, 0, 3}));
  OpDesc op =
      MakeOp("gather", {{"X", {"x"}}, {"Index", {"i"}}, {"Axis", {}}}, {{"Out", {"o"}}}, {{"axis", int32_t{1}}});
  ASSERT_TRUE(RunOps({op}, &s).ok());
  EXPECT_EQ(GetTensor(s, "o").dims(), (DDim{3, 3, 2}));
  EXPECT_EQ(GetTensor(s, "o").data<double>()[2 * 6 + 1 * 2 + 1], x.data<double>()[2 * 8 + 0 * 2 + 1]);
  ExpectGradientsMatch<double>(op, {{"x", x}, {"i", GetTensor(s, "i")}}, {"x"});
  SetTensor(&s, "i", MakeTensor<int64_t>({1}, {4}));
  EXPECT_NE(RunOps({op}, &s).message().find("holds 4, outside [0, 4)"), std::string::npos);
}

TEST(StackTest, StacksAtAnAxisAndSplitsTheGradient) {
  Tensor a = RandomTensor<double>({2, 3}, -1, 1, 2), b = RandomTensor<double>({2, 3}, -1, 1, 3);
  OpDesc op = MakeOp("stack", {{"X", {"a", "b"}}}, {{"Y", {"y"}}}, {{"axis", int32_t{1}}});
  Scope s;
  SetTensor(&s, "a", a);
  SetTensor(&s, "b", b);
  ASSERT_TRUE(RunOps({op}, &s).ok());
  EXPECT_EQ(GetTensor(s, "y").dims(), (DDim{2, 2, 3}));
  EXPECT_EQ(GetTensor(s, "y").data<double>()[6 + 3 + 2], b.data<double>()[3 + 2]);  // y[1][1][2] = b[1][2]
  ExpectGradientsMatch<double>(op, {{"a", a}, {"b", b}}, {"a", "b"});
}

TEST(GrowTest, ExpandAndTileRepeatAndSumTheGradientBack) {
  Tensor x = RandomTensor<double>({2, 1, 3}, -1, 1, 4);
  OpDesc expand = MakeOp("expand_v2", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"shape", std::vector<int32_t>{4, 2, -1, 3}}});
  OpDesc tile = MakeOp("tile", {{"X", {"x"}}}, {{"Out", {"t"}}}, {{"repeat_times", std::vector<int32_t>{2, 1, 2}}});
  Scope s;
  SetTensor(&s, "x", x);
  ASSERT_TRUE(RunOps({expand, tile}, &s).ok());
  EXPECT_EQ(GetTensor(s, "o").dims(), (DDim{4, 2, 1, 3}));
  EXPECT_EQ(GetTensor(s, "t").dims(), (DDim{4, 1, 6}));
  EXPECT_EQ(GetTensor(s, "o").data<double>()[3 * 6 + 1 * 3 + 2], x.data<double>()[1 * 3 + 2]);
  EXPECT_EQ(GetTensor(s, "t").data<double>()[3 * 6 + 4], x.data<double>()[1 * 3 + 1]);  // t[3][0][4] = x[1][0][1]
  ExpectGradientsMatch<double>(expand, {{"x", x}}, {"x"});
  ExpectGradientsMatch<double>(tile, {{"x", x}}, {"x"});
}

TEST(WhereTest, ChoosesByConditionAndRoutesTheGradient) {
  Tensor x = RandomTensor<double>({4}, -1, 1, 5), y = RandomTensor<double>({4}, -1, 1, 6);
  Scope s;
  Tensor c;
  bool* cp = c.mutable_data<bool>(DDim{4});
  cp[0] = true, cp[1] = false, cp[2] = false, cp[3] = true;
  SetTensor(&s, "c", c);
  SetTensor(&s, "x", x);
  SetTensor(&s, "y", y);
  OpDesc op = MakeOp("where", {{"Condition", {"c"}}, {"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}});
  ASSERT_TRUE(RunOps({op}, &s).ok());
  EXPECT_EQ(GetTensor(s, "o").data<double>()[0], x.data<double>()[0]);
  EXPECT_EQ(GetTensor(s, "o").data<double>()[1], y.data<double>()[1]);
  ExpectGradientsMatch<double>(op, {{"c", c}, {"x", x}, {"y", y}}, {"x", "y"});
}

TEST(CumsumTest, ExclusiveReverseAndTheGradient) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<double>({2, 3}, {1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(RunOps({MakeOp("cumsum", {{"X", {"x"}}}, {{"Out", {"a"}}}, {{"axis", int32_t{1}}}),
                      MakeOp("cumsum", {{"X", {"x"}}}, {{"Out", {"b"}}},
                             {{"axis", int32_t{0}}, {"exclusive", true}, {"reverse", true}})},
                     &s)
                  .ok());
  EXPECT_EQ(TensorToVector<double>(GetTensor(s, "a")), (std::vector<double>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(TensorToVector<double>(GetTensor(s, "b")), (std::vector<double>{4, 5, 6, 0, 0, 0}));
  ExpectGradientsMatch<double>(MakeOp("cumsum", {{"X", {"x"}}}, {{"Out", {"a"}}}, {{"axis", int32_t{1}}}),
                               {{"x", RandomTensor<double>({2, 3}, -1, 1, 7)}}, {"x"});
}

TEST(ArgTest, ArgMaxAndArgMinTakeTheFirstOfEqualValues) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 3}, {1, 5, 5, 7, -2, -2}));
  ASSERT_TRUE(RunOps({MakeOp("arg_max", {{"X", {"x"}}}, {{"Out", {"a"}}}, {{"axis", int64_t{1}}}),
                      MakeOp("arg_min", {{"X", {"x"}}}, {{"Out", {"b"}}}, {{"axis", int64_t{1}}, {"keepdims", true}})},
                     &s)
                  .ok());
  EXPECT_EQ(TensorToVector<int64_t>(GetTensor(s, "a")), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(GetTensor(s, "b").dims(), (DDim{2, 1}));
  EXPECT_EQ(TensorToVector<int64_t>(GetTensor(s, "b")), (std::vector<int64_t>{0, 1}));
}

TEST(OneHotLabelSmoothTest, EncodeAndSmooth) {
  Scope s;
  SetTensor(&s, "ids", MakeTensor<int64_t>({3}, {2, 0, 1}));
  ASSERT_TRUE(RunOps({MakeOp("one_hot_v2", {{"X", {"ids"}}}, {{"Out", {"h"}}}, {{"depth", int32_t{3}}}),
                      MakeOp("label_smooth", {{"X", {"h"}}}, {{"Out", {"l"}}}, {{"epsilon", 0.3f}})},
                     &s)
                  .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "h")), (std::vector<float>{0, 0, 1, 1, 0, 0, 0, 1, 0}));
  EXPECT_NEAR(GetTensor(s, "l").data<float>()[2], 0.7f + 0.1f, 1e-6);
  EXPECT_NEAR(GetTensor(s, "l").data<float>()[0], 0.1f, 1e-6);
  SetTensor(&s, "ids", MakeTensor<int64_t>({1}, {3}));
  EXPECT_FALSE(RunOps({MakeOp("one_hot_v2", {{"X", {"ids"}}}, {{"Out", {"h"}}}, {{"depth", int32_t{3}}})}, &s).ok());
}

class ReduceMoreTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReduceMoreTest, ValuesAndGradients) {
  Tensor x = RandomTensor<double>({2, 3, 4}, 0.2, 1.5, 8);
  for (int64_t i = 0; i < x.numel(); i += 2) x.data<double>()[i] *= -1;
  OpDesc op = MakeOp(GetParam(), {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"dim", std::vector<int32_t>{1}}});
  Scope s;
  SetTensor(&s, "x", x);
  ASSERT_TRUE(RunOps({op}, &s).ok());
  ASSERT_EQ(GetTensor(s, "o").dims(), (DDim{2, 4}));
  const double* xp = x.data<double>();
  double want = GetParam() == "reduce_prod" ? 1 : GetParam() == "reduce_max" ? -1e9 : 1e9;
  for (int j = 0; j < 3; ++j) {
    const double v = xp[1 * 12 + j * 4 + 2];  // x[1][j][2]
    want = GetParam() == "reduce_prod" ? want * v : GetParam() == "reduce_max" ? std::max(want, v) : std::min(want, v);
  }
  EXPECT_NEAR(GetTensor(s, "o").data<double>()[1 * 4 + 2], want, 1e-12);
  ExpectGradientsMatch<double>(op, {{"x", x}}, {"x"});
}

INSTANTIATE_TEST_SUITE_P(Ops, ReduceMoreTest, ::testing::Values("reduce_max", "reduce_min", "reduce_prod"));

}  // namespace
}  // namespace oar::testing

namespace oar::testing {
namespace {

TEST(LogSoftmaxTest, IsTheLogOfSoftmaxAlongAnAxisAndItsGradientMatches) {
  Tensor x = RandomTensor<double>({2, 3, 4}, -3, 3, 9);
  OpDesc op = MakeOp("log_softmax", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"axis", int32_t{1}}});
  Scope s;
  SetTensor(&s, "x", x);
  ASSERT_TRUE(RunOps({op}, &s).ok());
  const double* xp = x.data<double>();
  double sum = 0;  // the fibre x[1][:][2]
  for (int c = 0; c < 3; ++c) sum += std::exp(xp[12 + c * 4 + 2]);
  EXPECT_NEAR(GetTensor(s, "o").data<double>()[12 + 1 * 4 + 2], xp[12 + 4 + 2] - std::log(sum), 1e-12);
  ExpectGradientsMatch<double>(op, {{"x", x}}, {"x"});
}

}  // namespace
}  // namespace oar::testing
