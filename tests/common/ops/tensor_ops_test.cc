#include <cmath>

#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

TEST(FillConstantOpTest, FillsShapeAndDtype) {
  Scope s;
  ASSERT_TRUE(RunOps({MakeOp("fill_constant", {}, {{"Out", {"o"}}},
                             {{"shape", std::vector<int64_t>{2, 3}},
                              {"dtype", static_cast<int32_t>(DataType::kInt64)},
                              {"value", 7.0f}})},
                     &s)
                  .ok());
  const Tensor& o = GetTensor(s, "o");
  EXPECT_EQ(o.dtype(), DataType::kInt64);
  EXPECT_EQ(TensorToVector<int64_t>(o), (std::vector<int64_t>(6, 7)));
}

TEST(FillConstantOpTest, AcceptsInt32ShapeAttribute) {
  Scope s;  // Fluid before 1.5 wrote `shape` as INTS
  ASSERT_TRUE(
      RunOps({MakeOp("fill_constant", {}, {{"Out", {"o"}}}, {{"shape", std::vector<int32_t>{4}}, {"value", 1.0f}})}, &s)
          .ok());
  EXPECT_EQ(GetTensor(s, "o").dims(), (DDim{4}));
}

TEST(FillConstantOpTest, WrongAttributeTypeIsAnError) {
  Scope s;
  absl::Status st = RunOps({MakeOp("fill_constant", {}, {{"Out", {"o"}}}, {{"shape", std::string("2,3")}})}, &s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'shape'"), std::string::npos) << st;
}

TEST(RandomOpsTest, UniformIsInRangeAndSeeded) {
  auto run = [](int32_t seed) {
    Scope s;
    EXPECT_TRUE(RunOps({MakeOp("uniform_random", {}, {{"Out", {"o"}}},
                               {{"shape", std::vector<int64_t>{1000}}, {"min", -2.0f}, {"max", 3.0f}, {"seed", seed}})},
                       &s)
                    .ok());
    return TensorToVector<float>(GetTensor(s, "o"));
  };
  std::vector<float> a = run(5), b = run(5), c = run(6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (float v : a) {
    EXPECT_GE(v, -2.0f);
    EXPECT_LT(v, 3.0f);
  }
}

TEST(RandomOpsTest, GaussianHasRequestedMoments) {
  Scope s;
  ASSERT_TRUE(
      RunOps({MakeOp("gaussian_random", {}, {{"Out", {"o"}}},
                     {{"shape", std::vector<int64_t>{20000}}, {"mean", 1.0f}, {"std", 2.0f}, {"seed", int32_t{3}}})},
             &s)
          .ok());
  std::vector<float> v = TensorToVector<float>(GetTensor(s, "o"));
  double m = 0, var = 0;
  for (float x : v) m += x;
  m /= v.size();
  for (float x : v) var += (x - m) * (x - m);
  var /= v.size();
  EXPECT_NEAR(m, 1.0, 0.05);
  EXPECT_NEAR(std::sqrt(var), 2.0, 0.05);
}

TEST(SumOpTest, AddsInputsEvenWhenOutputAliasesOne) {
  Scope s;
  SetTensor(&s, "a", MakeTensor<float>({3}, {1, 2, 3}));
  SetTensor(&s, "b", MakeTensor<float>({3}, {10, 20, 30}));
  ASSERT_TRUE(RunOps({MakeOp("sum", {{"X", {"a", "b", "a"}}}, {{"Out", {"a"}}})}, &s).ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "a")), (std::vector<float>{12, 24, 36}));
}

// Dense inputs are added a tile of elements at a time; each element still
// takes its inputs in order, so it rounds as ((0 + a) + b) + c does, across
// tile boundaries (these values round otherwise when a and c go first).
TEST(SumOpTest, AddsDenseInputsInOrderAcrossTiles) {
  Scope s;
  const int64_t n = 5000;
  std::vector<float> a(n), b(n), c(n), want(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = (i % 2 ? 1e8f : -1e8f) + static_cast<float>(i);
    b[i] = 0.75f + static_cast<float>(i % 7);
    c[i] = -a[i];
    want[i] = ((0.0f + a[i]) + b[i]) + c[i];
  }
  SetTensor(&s, "a", MakeTensor<float>({n}, a));
  SetTensor(&s, "b", MakeTensor<float>({n}, b));
  SetTensor(&s, "c", MakeTensor<float>({n}, c));
  ASSERT_TRUE(RunOps({MakeOp("sum", {{"X", {"a", "b", "c"}}}, {{"Out", {"o"}}})}, &s).ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "o")), want);
  ASSERT_TRUE(RunOps({MakeOp("sum", {{"X", {"a", "c", "b"}}}, {{"Out", {"o"}}})}, &s).ok());
  EXPECT_NE(TensorToVector<float>(GetTensor(s, "o")), want);  // the order shows
}

TEST(SumOpTest, GradientMatches) {
  ExpectGradientsMatch<double>(
      MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"o"}}}),
      {{"a", RandomTensor<double>({2, 3}, -1, 1, 1)}, {"b", RandomTensor<double>({2, 3}, -1, 1, 2)}}, {"a", "b"});
}

TEST(SumOpTest, RejectsMismatchedShapes) {
  Scope s;
  SetTensor(&s, "a", MakeTensor<float>({3}, {1, 2, 3}));
  SetTensor(&s, "b", MakeTensor<float>({2}, {1, 2}));
  EXPECT_FALSE(RunOps({MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"o"}}})}, &s).ok());
}

TEST(ScaleOpTest, AppliesScaleAndBiasInBothOrders) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2}, {1, 2}));
  ASSERT_TRUE(RunOps({MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"a"}}}, {{"scale", 3.0f}, {"bias", 1.0f}}),
                      MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"b"}}},
                             {{"scale", 3.0f}, {"bias", 1.0f}, {"bias_after_scale", false}})},
                     &s)
                  .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "a")), (std::vector<float>{4, 7}));
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "b")), (std::vector<float>{6, 9}));
  ExpectGradientsMatch<double>(MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"scale", 3.0f}}),
                               {{"x", RandomTensor<double>({4}, -1, 1, 1)}}, {"x"});
}

TEST(OpRegistryTest, UnknownOpTypeIsNotFound) {
  Scope s;
  absl::Status st = RunOps({MakeOp("no_such_op", {}, {{"Out", {"o"}}})}, &s);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(st.message().find("no_such_op"), std::string::npos) << st;
}

TEST(OpRegistryTest, AnUnknownSlotBoundToAVariableIsRefusedNamingOpSlotAndVariable) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({1}, {1}));
  absl::Status st = RunOps({MakeOp("relu", {{"X", {"x"}}, {"Scale", {"x"}}}, {{"Out", {"o"}}})}, &s);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(
      st.message().find("relu: input slot 'Scale' is bound to 'x', and Oar's relu has no such slot (it reads: X)"),
      std::string::npos)
      << st;
}

// Paddle 2.x writes its newer optional slots empty on every op (concat's
// AxisTensor, split's SectionsTensorList ...): an empty slot is not given,
// whatever its name, and the op runs as without it.
TEST(OpRegistryTest, AnUnknownSlotWithNoVariableIsNotGiven) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2}, {-1, 2}));
  absl::Status st = RunOps({MakeOp("relu", {{"X", {"x"}}, {"ScaleTensor", {}}, {"AxisTensor", {"@EMPTY@"}}},
                                   {{"Out", {"o"}}, {"XShape", {}}})},
                           &s);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(GetTensor(s, "o").data<float>()[0], 0.0f);
  EXPECT_EQ(GetTensor(s, "o").data<float>()[1], 2.0f);
}

}  // namespace
}  // namespace oar::testing
