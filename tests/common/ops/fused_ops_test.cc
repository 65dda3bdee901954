// fused_elemwise_activation(+_grad) against the unfused op pair they replace,
// on a bias over the middle axis (pre, n, post all > 1) and on equal shapes.
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

struct Case {
  std::string act;
  DDim x, y;
  int32_t axis;
};

class FusedElemwiseActivationTest : public ::testing::TestWithParam<Case> {};

TEST_P(FusedElemwiseActivationTest, EqualsAddThenActivationForwardAndBackward) {
  const Case c = GetParam();
  Scope scope;
  SetTensor(&scope, "x", RandomTensor<double>(c.x, -1, 1, 1));
  SetTensor(&scope, "y", RandomTensor<double>(c.y, -1, 1, 2));
  SetTensor(&scope, "g", RandomTensor<double>(c.x, -1, 1, 3));
  const std::vector<OpDesc> unfused = {
      MakeOp("elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"t"}}}, {{"axis", c.axis}}),
      MakeOp(c.act, {{"X", {"t"}}}, {{"Out", {"out"}}}),
      MakeOp(c.act + "_grad", {{"Out", {"out"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dt"}}}),
      MakeOp("elementwise_add_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"dt"}}},
             {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}, {{"axis", c.axis}}),
  };
  const std::vector<OpDesc> fused = {
      MakeOp("fused_elemwise_activation", {{"X", {"x"}}, {"Y", {"y"}}},
             {{"Out", {"out2"}}, {"IntermediateOut", {"t2"}}},
             {{"axis", c.axis},
              {"save_intermediate_out", true},
              {"functor_list", std::vector<std::string>{c.act, "elementwise_add"}}}),
      MakeOp("fused_elemwise_activation_grad", {{"Y", {"y"}}, {"Out", {"out2"}}, {"Out@GRAD", {"g"}}},
             {{"X@GRAD", {"dx2"}}, {"Y@GRAD", {"dy2"}}, {"IntermediateOut@GRAD", {"dt2"}}},
             {{"axis", c.axis}, {"functor_list", std::vector<std::string>{c.act + "_grad", "elementwise_add_grad"}}}),
  };
  ASSERT_TRUE(RunOps(unfused, &scope).ok());
  auto s = RunOps(fused, &scope);
  ASSERT_TRUE(s.ok()) << s;
  for (auto [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"out", "out2"}, {"t", "t2"}, {"dt", "dt2"}, {"dx", "dx2"}, {"dy", "dy2"}}) {
    const Tensor& ta = GetTensor(scope, a);
    const Tensor& tb = GetTensor(scope, b);
    ASSERT_EQ(ta.dims(), tb.dims()) << a;
    for (int64_t i = 0; i < ta.numel(); ++i) EXPECT_NEAR(ta.data<double>()[i], tb.data<double>()[i], 1e-12) << a << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Acts, FusedElemwiseActivationTest,
                         ::testing::Values(Case{"relu", {2, 3, 4}, {3}, 1}, Case{"sigmoid", {2, 3, 4}, {3}, 1},
                                           Case{"tanh", {5, 4}, {4}, 1}, Case{"relu", {3, 4}, {3, 4}, -1}));

TEST(FusedElemwiseActivationTest, UnknownFunctorsAreNamed) {
  Scope scope;
  SetTensor(&scope, "x", RandomTensor<float>({2, 3}, -1, 1, 1));
  SetTensor(&scope, "y", RandomTensor<float>({3}, -1, 1, 2));
  auto s = RunOps({MakeOp("fused_elemwise_activation", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}},
                          {{"functor_list", std::vector<std::string>{"softmax", "elementwise_add"}}})},
                  &scope);
  EXPECT_NE(s.message().find("activation 'softmax' is not fusable"), std::string::npos) << s;
  s = RunOps({MakeOp("fused_elemwise_activation", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}},
                     {{"functor_list", std::vector<std::string>{"relu", "elementwise_mul"}}})},
             &scope);
  EXPECT_NE(s.message().find("functor_list must be"), std::string::npos) << s;
}

}  // namespace
}  // namespace oar::testing
