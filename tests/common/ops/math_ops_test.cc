#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

TEST(MulOpTest, ComputesFlattenedProduct) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  SetTensor(&s, "y", MakeTensor<float>({3, 2}, {1, 0, 0, 1, 1, 1}));
  ASSERT_TRUE(RunOps({MakeOp("mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}})}, &s).ok());
  const Tensor& out = GetTensor(s, "out");
  EXPECT_EQ(out.dims(), (DDim{2, 2}));
  EXPECT_EQ(TensorToVector<float>(out), (std::vector<float>{4, 5, 10, 11}));
}

TEST(MulOpTest, InfersShapeWithNumColDims) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({2, 3, 4}, -1, 1, 1));
  SetTensor(&s, "y", RandomTensor<float>({4, 5}, -1, 1, 2));
  ASSERT_TRUE(
      RunOps({MakeOp("mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}}, {{"x_num_col_dims", int32_t{2}}})}, &s)
          .ok());
  EXPECT_EQ(GetTensor(s, "out").dims(), (DDim{2, 3, 5}));
}

TEST(MulOpTest, RejectsMismatchedInnerDimensionNamingShapes) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({2, 3}, -1, 1, 1));
  SetTensor(&s, "y", RandomTensor<float>({4, 5}, -1, 1, 2));
  absl::Status st = RunOps({MakeOp("mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}})}, &s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("mul"), std::string::npos) << st;
  EXPECT_NE(st.message().find("[2, 3]"), std::string::npos) << st;
}

TEST(MulOpTest, GradientMatchesNumericFp64) {
  OpDesc op = MakeOp("mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}},
                     {{"x_num_col_dims", int32_t{1}}, {"y_num_col_dims", int32_t{1}}});
  ExpectGradientsMatch<double>(
      op, {{"x", RandomTensor<double>({3, 2, 2}, -1, 1, 1)}, {"y", RandomTensor<double>({4, 5}, -1, 1, 2)}},
      {"x", "y"});
}

TEST(MulOpTest, GradientMatchesNumericFp32) {
  OpDesc op = MakeOp("mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}});
  ExpectGradientsMatch<float>(
      op, {{"x", RandomTensor<float>({3, 4}, -1, 1, 1)}, {"y", RandomTensor<float>({4, 2}, -1, 1, 2)}}, {"x", "y"},
      {.eps = 1e-2, .tolerance = 1e-3});
}

struct MatmulCase {
  DDim x, y;
  bool tx, ty;
  DDim out;
  bool v2 = false;  // matmul_v2 (trans_x/trans_y, no alpha)
};

class MatmulOpTest : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(MatmulOpTest, ShapeAndGradientMatch) {
  const MatmulCase& c = GetParam();
  OpDesc op = c.v2 ? MakeOp("matmul_v2", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}},
                            {{"trans_x", c.tx}, {"trans_y", c.ty}})
                   : MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"out"}}},
                            {{"transpose_X", c.tx}, {"transpose_Y", c.ty}, {"alpha", 0.5f}});
  Scope s;
  std::map<std::string, Tensor> in = {{"x", RandomTensor<double>(c.x, -1, 1, 3)},
                                      {"y", RandomTensor<double>(c.y, -1, 1, 4)}};
  for (auto& [n, t] : in) SetTensor(&s, n, t);
  ASSERT_TRUE(RunOps({op}, &s).ok());
  EXPECT_EQ(GetTensor(s, "out").dims(), c.out);
  ExpectGradientsMatch<double>(op, in, {"x", "y"});
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MatmulOpTest,
    ::testing::Values(MatmulCase{{2, 3}, {3, 4}, false, false, {2, 4}}, MatmulCase{{3, 2}, {3, 4}, true, false, {2, 4}},
                      MatmulCase{{2, 3}, {4, 3}, false, true, {2, 4}}, MatmulCase{{3, 2}, {4, 3}, true, true, {2, 4}},
                      MatmulCase{{5, 2, 3}, {5, 3, 4}, false, false, {5, 2, 4}},
                      MatmulCase{{5, 2, 3}, {3, 4}, false, false, {5, 2, 4}},
                      MatmulCase{{2, 3}, {5, 4, 3}, false, true, {5, 2, 4}},
                      // Vectors: the dimension a vector gains is dropped again
                      // unless it was transposed (matmul); matmul_v2 ignores
                      // trans on vectors and makes a scalar of two.
                      MatmulCase{{3}, {3, 4}, false, false, {4}}, MatmulCase{{3}, {1, 4}, true, false, {3, 4}},
                      MatmulCase{{5, 2, 3}, {3}, false, false, {5, 2}}, MatmulCase{{3}, {3}, false, false, {1}},
                      MatmulCase{{3}, {3, 4}, true, false, {4}, true},
                      MatmulCase{{5, 2, 3}, {3}, false, true, {5, 2}, true},
                      MatmulCase{{3}, {3}, false, false, {}, true}),
    [](const ::testing::TestParamInfo<MatmulCase>& info) {
      const MatmulCase& c = info.param;
      return std::string(c.v2 ? "v2_" : "") + "X" + std::to_string(c.x.size()) + "d" + (c.tx ? "T" : "") + "_Y" +
             std::to_string(c.y.size()) + "d" + (c.ty ? "T" : "") + "_" + std::to_string(info.index);
    });

TEST(MatmulOpTest, VectorTimesMatrixIsTheRowProduct) {
  Scope s;
  SetTensor(&s, "v", MakeTensor<float>({2}, {1, 2}));
  SetTensor(&s, "row", MakeTensor<float>({1, 2}, {1, 2}));
  SetTensor(&s, "m", MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(RunOps({MakeOp("matmul_v2", {{"X", {"v"}}, {"Y", {"m"}}}, {{"Out", {"a"}}}),
                      MakeOp("matmul_v2", {{"X", {"m"}}, {"Y", {"v"}}}, {{"Out", {"b"}}}, {{"trans_x", true}}),
                      MakeOp("matmul_v2", {{"X", {"v"}}, {"Y", {"v"}}}, {{"Out", {"dot"}}})},
                     &s)
                  .ok());
  EXPECT_EQ(GetTensor(s, "a").dims(), (DDim{3}));
  EXPECT_EQ(GetTensor(s, "b").dims(), (DDim{3}));
  for (const char* out : {"a", "b"}) {
    const float* p = GetTensor(s, out).data<float>();
    EXPECT_EQ(std::vector<float>(p, p + 3), (std::vector<float>{9, 12, 15})) << out;
  }
  EXPECT_EQ(GetTensor(s, "dot").data<float>()[0], 5.0f);
}

TEST(MatmulOpTest, RejectsInnerMismatch) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({2, 3}, -1, 1, 1));
  SetTensor(&s, "y", RandomTensor<float>({2, 3}, -1, 1, 2));
  absl::Status st = RunOps({MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}})}, &s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
}

}  // namespace
}  // namespace oar::testing
