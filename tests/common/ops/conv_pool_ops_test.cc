#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

struct ConvCase {
  std::string name;
  DDim input, filter;
  std::vector<int32_t> strides, paddings, dilations;
  int32_t groups;
  DDim output;
};

class Conv2dTest : public ::testing::TestWithParam<ConvCase> {};

OpDesc ConvOp(const ConvCase& c) {
  return MakeOp("conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, {{"Output", {"y"}}},
                {{"strides", c.strides}, {"paddings", c.paddings}, {"dilations", c.dilations}, {"groups", c.groups}});
}

TEST_P(Conv2dTest, ShapeAndGradientsMatch) {
  const ConvCase& c = GetParam();
  std::map<std::string, Tensor> in = {{"x", RandomTensor<double>(c.input, -1, 1, 1)},
                                      {"w", RandomTensor<double>(c.filter, -1, 1, 2)}};
  Scope s;
  for (auto& [n, t] : in) SetTensor(&s, n, t);
  ASSERT_TRUE(RunOps({ConvOp(c)}, &s).ok());
  EXPECT_EQ(GetTensor(s, "y").dims(), c.output);
  ExpectGradientsMatch<double>(ConvOp(c), in, {"x", "w"});
  std::map<std::string, Tensor> in32 = {{"x", RandomTensor<float>(c.input, -1, 1, 1)},
                                        {"w", RandomTensor<float>(c.filter, -1, 1, 2)}};
  ExpectGradientsMatch<float>(ConvOp(c), in32, {"x", "w"}, {.eps = 1e-2, .tolerance = 1e-3});
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, Conv2dTest,
    ::testing::Values(ConvCase{"plain", {2, 2, 5, 5}, {3, 2, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, {2, 3, 3, 3}},
                      ConvCase{"padded_strided", {1, 2, 6, 5}, {2, 2, 3, 2}, {2, 1}, {1, 1}, {1, 1}, 1, {1, 2, 3, 6}},
                      ConvCase{"dilated", {1, 1, 7, 7}, {2, 1, 3, 3}, {1, 1}, {1, 1}, {2, 2}, 1, {1, 2, 5, 5}},
                      ConvCase{"grouped", {1, 4, 4, 4}, {6, 2, 2, 2}, {1, 1}, {0, 0}, {1, 1}, 2, {1, 6, 3, 3}}),
    [](const ::testing::TestParamInfo<ConvCase>& i) { return i.param.name; });

TEST(Conv2dTest, MatchesDirectConvolution) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}));
  SetTensor(&s, "w", MakeTensor<float>({1, 1, 2, 2}, {1, 0, 0, -1}));
  ASSERT_TRUE(RunOps({MakeOp("conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, {{"Output", {"y"}}})}, &s).ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "y")), (std::vector<float>{-4, -4, -4, -4}));
}

TEST(Conv2dTest, ChannelMismatchIsAnError) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({1, 3, 5, 5}, -1, 1, 1));
  SetTensor(&s, "w", RandomTensor<float>({2, 2, 3, 3}, -1, 1, 2));
  absl::Status st = RunOps({MakeOp("conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, {{"Output", {"y"}}})}, &s);
  EXPECT_NE(st.message().find("3 channels"), std::string::npos) << st;
}

struct PoolCase {
  std::string name;
  std::string type;
  DDim input;
  std::vector<int32_t> ksize, strides, paddings;
  bool global, ceil_mode, exclusive;
  DDim output;
  bool adaptive = false;  // ksize is the output size
};

class Pool2dTest : public ::testing::TestWithParam<PoolCase> {};

OpDesc PoolOp(const PoolCase& c) {
  return MakeOp("pool2d", {{"X", {"x"}}}, {{"Out", {"y"}}},
                {{"pooling_type", c.type},
                 {"ksize", c.ksize},
                 {"strides", c.strides},
                 {"paddings", c.paddings},
                 {"global_pooling", c.global},
                 {"ceil_mode", c.ceil_mode},
                 {"exclusive", c.exclusive},
                 {"adaptive", c.adaptive}});
}

TEST_P(Pool2dTest, ShapeAndGradientMatch) {
  const PoolCase& c = GetParam();
  Tensor x = RandomTensor<double>(c.input, -1, 1, 5);  // distinct values: no max ties
  Scope s;
  SetTensor(&s, "x", x);
  ASSERT_TRUE(RunOps({PoolOp(c)}, &s).ok());
  EXPECT_EQ(GetTensor(s, "y").dims(), c.output);
  ExpectGradientsMatch<double>(PoolOp(c), {{"x", x}}, {"x"});
}

INSTANTIATE_TEST_SUITE_P(
    Modes, Pool2dTest,
    ::testing::Values(
        PoolCase{"max", "max", {2, 2, 4, 4}, {2, 2}, {2, 2}, {0, 0}, false, false, true, {2, 2, 2, 2}},
        PoolCase{"avg_padded_exclusive", "avg", {1, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1}, false, false, true, {1, 2, 3, 3}},
        PoolCase{
            "avg_padded_inclusive", "avg", {1, 1, 5, 5}, {3, 3}, {2, 2}, {1, 1}, false, false, false, {1, 1, 3, 3}},
        PoolCase{"max_ceil", "max", {1, 1, 5, 5}, {2, 2}, {2, 2}, {0, 0}, false, true, true, {1, 1, 3, 3}},
        PoolCase{"global_avg", "avg", {2, 3, 4, 3}, {1, 1}, {1, 1}, {0, 0}, true, false, true, {2, 3, 1, 1}},
        // Adaptive: windows of unequal sizes (5 rows into 3, 7 columns into 2), and equal ones.
        PoolCase{
            "adaptive_avg_uneven", "avg", {2, 2, 5, 7}, {3, 2}, {1, 1}, {0, 0}, false, false, true, {2, 2, 3, 2}, true},
        PoolCase{
            "adaptive_max_uneven", "max", {1, 2, 5, 5}, {2, 3}, {1, 1}, {0, 0}, false, false, true, {1, 2, 2, 3}, true},
        PoolCase{
            "adaptive_avg_even", "avg", {1, 2, 4, 6}, {2, 3}, {1, 1}, {0, 0}, false, false, false, {1, 2, 2, 3}, true}),
    [](const ::testing::TestParamInfo<PoolCase>& i) { return i.param.name; });

TEST(Pool2dTest, MaxPicksWindowMaxima) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({1, 1, 2, 4}, {1, 5, 2, 0, 3, 4, 8, 7}));
  ASSERT_TRUE(RunOps({MakeOp("pool2d", {{"X", {"x"}}}, {{"Out", {"y"}}},
                             {{"ksize", std::vector<int32_t>{2, 2}}, {"strides", std::vector<int32_t>{2, 2}}})},
                     &s)
                  .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "y")), (std::vector<float>{5, 8}));
}

TEST(Pool2dTest, ABadPoolingTypeIsAnError) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({1, 1, 4, 4}, -1, 1, 1));
  EXPECT_NE(RunOps({MakeOp("pool2d", {{"X", {"x"}}}, {{"Out", {"y"}}}, {{"pooling_type", std::string("min")}})}, &s)
                .message()
                .find("'min'"),
            std::string::npos);
}

// Paddle's adaptive windows: output cell i of n over a size-H axis covers
// [floor(i*H/n), ceil((i+1)*H/n)). 1x5 into 1x3: [0,2) [1,4) [3,5).
TEST(Pool2dTest, AdaptiveWindowsOverlapAsPaddlesDo) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({1, 1, 1, 5}, {1, 2, 3, 4, 10}));
  auto pool = [&](const std::string& type) {
    return RunOps({MakeOp("pool2d", {{"X", {"x"}}}, {{"Out", {"y"}}},
                          {{"pooling_type", type}, {"ksize", std::vector<int32_t>{1, 3}}, {"adaptive", true}})},
                  &s);
  };
  ASSERT_TRUE(pool("avg").ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "y")), (std::vector<float>{1.5f, 3.f, 7.f}));
  ASSERT_TRUE(pool("max").ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "y")), (std::vector<float>{2.f, 4.f, 10.f}));
}

}  // namespace
}  // namespace oar::testing
