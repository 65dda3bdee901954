// Gradient checks and values for the math ops schedules and clipping use.
#include <cmath>

#include "common/framework/executor.h"
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

class UnaryMathGradTest : public ::testing::TestWithParam<std::string> {};

TEST_P(UnaryMathGradTest, GradientMatchesNumeric) {
  // Positive, away from integers: sqrt's domain and floor/ceil's flat parts.
  Tensor x = RandomTensor<double>({3, 4}, 0.1, 0.9, 1);
  for (int64_t i = 0; i < x.numel(); i += 3) x.data<double>()[i] += 1;
  ExpectGradientsMatch<double>(MakeOp(GetParam(), {{"X", {"x"}}}, {{"Out", {"o"}}}), {{"x", x}}, {"x"});
}

INSTANTIATE_TEST_SUITE_P(Ops, UnaryMathGradTest,
                         ::testing::Values("exp", "sqrt", "cos", "abs", "floor", "ceil", "sign"));

TEST(UnaryMathOpTest, Values) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({3}, {-1.5f, 0.0f, 2.25f}));
  ASSERT_TRUE(
      RunOps({MakeOp("floor", {{"X", {"x"}}}, {{"Out", {"f"}}}), MakeOp("ceil", {{"X", {"x"}}}, {{"Out", {"c"}}}),
              MakeOp("sign", {{"X", {"x"}}}, {{"Out", {"s"}}}), MakeOp("abs", {{"X", {"x"}}}, {{"Out", {"a"}}})},
             &s)
          .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "f")), (std::vector<float>{-2, 0, 2}));
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "c")), (std::vector<float>{-1, 0, 3}));
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "s")), (std::vector<float>{-1, 0, 1}));
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "a")), (std::vector<float>{1.5f, 0, 2.25f}));
}

class BinaryMathGradTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BinaryMathGradTest, GradientMatchesNumeric) {
  ExpectGradientsMatch<double>(
      MakeOp(GetParam(), {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}),
      {{"x", RandomTensor<double>({3, 4}, 0.5, 2, 1)}, {"y", RandomTensor<double>({3, 4}, 0.5, 2, 2)}}, {"x", "y"});
  ExpectGradientsMatch<double>(
      MakeOp(GetParam(), {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}),
      {{"x", RandomTensor<double>({3, 4}, 0.5, 2, 3)}, {"y", RandomTensor<double>({4}, 0.5, 2, 4)}}, {"x", "y"});
}

INSTANTIATE_TEST_SUITE_P(Ops, BinaryMathGradTest,
                         ::testing::Values("elementwise_max", "elementwise_min", "elementwise_pow"));

TEST(ReduceOpTest, SumsAndAveragesOverDims) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(RunOps({MakeOp("reduce_sum", {{"X", {"x"}}}, {{"Out", {"a"}}}, {{"dim", std::vector<int32_t>{1}}}),
                      MakeOp("reduce_mean", {{"X", {"x"}}}, {{"Out", {"b"}}},
                             {{"dim", std::vector<int32_t>{0}}, {"keep_dim", true}}),
                      MakeOp("reduce_sum", {{"X", {"x"}}}, {{"Out", {"c"}}}, {{"reduce_all", true}})},
                     &s)
                  .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "a")), (std::vector<float>{6, 15}));
  EXPECT_EQ(GetTensor(s, "b").dims(), (DDim{1, 3}));
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "b")), (std::vector<float>{2.5f, 3.5f, 4.5f}));
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "c")), (std::vector<float>{21}));
}

TEST(ReduceOpTest, GradientsMatch) {
  for (const char* type : {"reduce_sum", "reduce_mean"}) {
    ExpectGradientsMatch<double>(MakeOp(type, {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"dim", std::vector<int32_t>{0, 2}}}),
                                 {{"x", RandomTensor<double>({2, 3, 4}, -1, 1, 1)}}, {"x"});
  }
}

TEST(ClipOpTest, ClipsAndPassesGradientInside) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({4}, {-3, -0.5f, 0.5f, 3}));
  ASSERT_TRUE(RunOps({MakeOp("clip", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"min", -1.0f}, {"max", 1.0f}}),
                      MakeOp("clip_by_norm", {{"X", {"x"}}}, {{"Out", {"n"}}}, {{"max_norm", 1.0f}})},
                     &s)
                  .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "o")), (std::vector<float>{-1, -0.5f, 0.5f, 1}));
  double norm = 0;
  for (float v : TensorToVector<float>(GetTensor(s, "n"))) norm += v * v;
  EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-6);
  ExpectGradientsMatch<double>(MakeOp("clip", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"min", -0.5f}, {"max", 0.5f}}),
                               {{"x", MakeTensor<double>({4}, {-0.9, -0.2, 0.3, 0.8})}}, {"x"});
}

TEST(ControlOpsTest, CastIncrementCompareAndLogic) {
  Scope s;
  SetTensor(&s, "i", MakeTensor<int64_t>({1}, {4}));
  SetTensor(&s, "x", MakeTensor<float>({3}, {1, 5, 2}));
  SetTensor(&s, "y", MakeTensor<float>({1}, {2}));
  ASSERT_TRUE(
      RunOps({MakeOp("increment", {{"X", {"i"}}}, {{"Out", {"i"}}}, {{"step", 3.0f}}),
              MakeOp("cast", {{"X", {"i"}}}, {{"Out", {"f"}}}, {{"in_dtype", int32_t{3}}, {"out_dtype", int32_t{5}}}),
              MakeOp("less_than", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"lt"}}}),
              MakeOp("logical_not", {{"X", {"lt"}}}, {{"Out", {"nlt"}}}),
              MakeOp("logical_and", {{"X", {"lt"}}, {"Y", {"nlt"}}}, {{"Out", {"none"}}})},
             &s)
          .ok());
  EXPECT_EQ(GetTensor(s, "i").data<int64_t>()[0], 7);
  EXPECT_EQ(GetTensor(s, "f").dtype(), DataType::kFloat32);
  EXPECT_EQ(GetTensor(s, "f").data<float>()[0], 7.0f);
  EXPECT_EQ(TensorToVector<bool>(GetTensor(s, "lt")), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(TensorToVector<bool>(GetTensor(s, "none")), (std::vector<bool>{false, false, false}));
}

// Out bound to X, to a wider type (the buffer X's values are read from
// must outlive Out's new one) and back to a narrower one.
TEST(ControlOpsTest, CastInPlaceWidensAndNarrows) {
  Scope s;
  std::vector<int32_t> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i * 7919 % 2003) - 1000;
  SetTensor(&s, "v", MakeTensor<int32_t>({10, 100}, v));
  const auto cast = [](DataType from, DataType to) {
    return MakeOp("cast", {{"X", {"v"}}}, {{"Out", {"v"}}},
                  {{"in_dtype", static_cast<int32_t>(from)}, {"out_dtype", static_cast<int32_t>(to)}});
  };
  ASSERT_TRUE(RunOps({cast(DataType::kInt32, DataType::kFloat64)}, &s).ok());
  ASSERT_EQ(GetTensor(s, "v").dtype(), DataType::kFloat64);
  const std::vector<double> wide = TensorToVector<double>(GetTensor(s, "v"));
  ASSERT_EQ(wide.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(wide[i], v[i]) << i;
  ASSERT_TRUE(RunOps({cast(DataType::kFloat64, DataType::kInt32)}, &s).ok());
  EXPECT_EQ(GetTensor(s, "v").dims(), (DDim{10, 100}));
  EXPECT_EQ(TensorToVector<int32_t>(GetTensor(s, "v")), v);
}

TEST(ControlOpsTest, ConditionalBlockRunsItsSubBlockOnlyWhenTrue) {
  for (bool cond : {true, false}) {
    ProgramDesc p;
    BlockDesc* sub = p.AppendBlock(0);
    OpDesc* assign = sub->AppendOp();
    assign->type = "assign";
    assign->SetInput("X", {"one"});
    assign->SetOutput("Out", {"out"});
    OpDesc* op = p.MutableBlock(0)->AppendOp();
    op->type = "conditional_block";
    op->SetInput("Cond", {"c"});
    op->SetInput("Input", {"one"});
    op->SetOutput("Out", {"out"});
    op->SetAttr("sub_block", BlockRef{1});
    op->SetAttr("is_scalar_condition", true);
    Scope s;
    SetTensor(&s, "c", MakeTensor<bool>({1}, {cond}));
    SetTensor(&s, "one", MakeTensor<float>({1}, {1}));
    SetTensor(&s, "out", MakeTensor<float>({1}, {0}));
    Executor exe;
    auto run = exe.Run(p, &s);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(GetTensor(s, "out").data<float>()[0], cond ? 1.0f : 0.0f);
  }
}

}  // namespace
}  // namespace oar::testing
