#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

struct ViewCase {
  std::string name;
  OpDesc op;
  DDim in, out;
};

class ViewOpTest : public ::testing::TestWithParam<ViewCase> {};

TEST_P(ViewOpTest, ShapeValuesAndGradient) {
  const ViewCase& c = GetParam();
  Tensor x = RandomTensor<double>(c.in, -1, 1, 1);
  Scope s;
  SetTensor(&s, "x", x);
  ASSERT_TRUE(RunOps({c.op}, &s).ok());
  EXPECT_EQ(GetTensor(s, "y").dims(), c.out);
  ExpectGradientsMatch<double>(c.op, {{"x", x}}, {"x"}, {.loss_outputs = {"y"}});
}

OpDesc View(const std::string& type, const std::string& attr, Attribute v) {
  return MakeOp(type, {{"X", {"x"}}}, {{"Out", {"y"}}, {"XShape", {"xs"}}}, {{attr, v}});
}

INSTANTIATE_TEST_SUITE_P(
    Ops, ViewOpTest,
    ::testing::Values(
        ViewCase{"reshape_infer", View("reshape2", "shape", std::vector<int32_t>{0, -1}), {2, 3, 4}, {2, 12}},
        ViewCase{"reshape_full", View("reshape2", "shape", std::vector<int32_t>{4, 6}), {2, 3, 4}, {4, 6}},
        ViewCase{"flatten", View("flatten2", "axis", int32_t{2}), {2, 3, 4, 5}, {6, 20}},
        ViewCase{"squeeze", View("squeeze2", "axes", std::vector<int32_t>{1}), {3, 1, 2}, {3, 2}},
        ViewCase{"squeeze_all", View("squeeze2", "axes", std::vector<int32_t>{}), {1, 3, 1}, {3}},
        ViewCase{"unsqueeze", View("unsqueeze2", "axes", std::vector<int32_t>{0, 2}), {3, 2}, {1, 3, 1, 2}},
        ViewCase{"transpose", View("transpose2", "axis", std::vector<int32_t>{2, 0, 1}), {2, 3, 4}, {4, 2, 3}}),
    [](const ::testing::TestParamInfo<ViewCase>& i) { return i.param.name; });

TEST(Transpose2OpTest, PermutesValues) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(RunOps({View("transpose2", "axis", std::vector<int32_t>{1, 0})}, &s).ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "y")), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(ViewOpTest, BadShapesAreErrors) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({2, 3}, -1, 1, 1));
  EXPECT_NE(RunOps({View("reshape2", "shape", std::vector<int32_t>{4, -1})}, &s).message().find("cannot reshape"),
            std::string::npos);
  EXPECT_NE(RunOps({View("reshape2", "shape", std::vector<int32_t>{-1, -1})}, &s).message().find("more than one -1"),
            std::string::npos);
  EXPECT_NE(RunOps({View("squeeze2", "axes", std::vector<int32_t>{0})}, &s).message().find("is not 1"),
            std::string::npos);
  EXPECT_NE(RunOps({View("transpose2", "axis", std::vector<int32_t>{0, 0})}, &s).message().find("not a permutation"),
            std::string::npos);
}

TEST(ConcatSplitOpTest, ConcatAndSplitAreInverse) {
  Scope s;
  SetTensor(&s, "a", MakeTensor<float>({2, 1}, {1, 2}));
  SetTensor(&s, "b", MakeTensor<float>({2, 2}, {3, 4, 5, 6}));
  ASSERT_TRUE(RunOps({MakeOp("concat", {{"X", {"a", "b"}}}, {{"Out", {"c"}}}, {{"axis", int32_t{1}}}),
                      MakeOp("split", {{"X", {"c"}}}, {{"Out", {"p", "q"}}},
                             {{"axis", int32_t{1}}, {"sections", std::vector<int32_t>{1, -1}}})},
                     &s)
                  .ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "c")), (std::vector<float>{1, 3, 4, 2, 5, 6}));
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "q")), (std::vector<float>{3, 4, 5, 6}));
}

TEST(ConcatSplitOpTest, GradientsMatch) {
  ExpectGradientsMatch<double>(
      MakeOp("concat", {{"X", {"a", "b"}}}, {{"Out", {"c"}}}, {{"axis", int32_t{0}}}),
      {{"a", RandomTensor<double>({1, 3}, -1, 1, 1)}, {"b", RandomTensor<double>({2, 3}, -1, 1, 2)}}, {"a", "b"});
  ExpectGradientsMatch<double>(
      MakeOp("split", {{"X", {"x"}}}, {{"Out", {"p", "q", "r"}}}, {{"axis", int32_t{1}}, {"num", int32_t{3}}}),
      {{"x", RandomTensor<double>({2, 6}, -1, 1, 1)}}, {"x"});
}

TEST(ConcatSplitOpTest, MismatchedShapesAreErrors) {
  Scope s;
  SetTensor(&s, "a", RandomTensor<float>({2, 3}, -1, 1, 1));
  SetTensor(&s, "b", RandomTensor<float>({3, 2}, -1, 1, 2));
  EXPECT_FALSE(RunOps({MakeOp("concat", {{"X", {"a", "b"}}}, {{"Out", {"c"}}}, {{"axis", int32_t{0}}})}, &s).ok());
  EXPECT_NE(
      RunOps({MakeOp("split", {{"X", {"a"}}}, {{"Out", {"p", "q"}}}, {{"axis", int32_t{1}}, {"num", int32_t{2}}})}, &s)
          .message()
          .find("does not split evenly"),
      std::string::npos);
}

}  // namespace
}  // namespace oar::testing
