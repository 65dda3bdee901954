#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

// Three sequences of lengths 2, 0 and 3 over 2-wide rows.
template <typename T>
Tensor Sequences() {
  Tensor x = MakeTensor<T>({5, 2}, {1, 9, 3, 2, 5, 4, 7, 1, 6, 8});
  x.set_lod({{0, 2, 2, 5}});
  return x;
}

OpDesc Pool(const std::string& type) {
  return MakeOp("sequence_pool", {{"X", {"x"}}}, {{"Out", {"out"}}, {"MaxIndex", {"idx"}}},
                {{"pooltype", type}, {"pad_value", -1.0f}});
}

struct PoolCase {
  std::string type;
  std::vector<float> out;
};

class SequencePoolTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(SequencePoolTest, PoolsEachSequenceAndPadsEmptyOnes) {
  Scope s;
  SetTensor(&s, "x", Sequences<float>());
  ASSERT_TRUE(RunOps({Pool(GetParam().type)}, &s).ok());
  const Tensor& out = GetTensor(s, "out");
  EXPECT_EQ(out.dims(), (DDim{3, 2}));
  std::vector<float> got = TensorToVector<float>(out);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], GetParam().out[i], 1e-5) << i;
}

TEST_P(SequencePoolTest, GradientMatchesNumeric) {
  ExpectGradientsMatch<double>(Pool(GetParam().type), {{"x", Sequences<double>()}}, {"x"}, {.loss_outputs = {"out"}});
}

INSTANTIATE_TEST_SUITE_P(
    Types, SequencePoolTest,
    ::testing::Values(
        PoolCase{"SUM", {4, 11, -1, -1, 18, 13}}, PoolCase{"AVERAGE", {2, 5.5f, -1, -1, 6, 13.f / 3}},
        PoolCase{"SQRT", {4 / std::sqrt(2.f), 11 / std::sqrt(2.f), -1, -1, 18 / std::sqrt(3.f), 13 / std::sqrt(3.f)}},
        PoolCase{"MAX", {3, 9, -1, -1, 7, 8}}, PoolCase{"FIRST", {1, 9, -1, -1, 5, 4}},
        PoolCase{"LAST", {3, 2, -1, -1, 6, 8}}),
    [](const ::testing::TestParamInfo<PoolCase>& i) { return i.param.type; });

TEST(SequencePoolOpTest, MissingOrBadLoDAndTypeAreErrors) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 1}, {1, 2}));
  EXPECT_NE(RunOps({Pool("SUM")}, &s).message().find("has no LoD"), std::string::npos);
  Tensor bad = MakeTensor<float>({2, 1}, {1, 2});
  bad.set_lod({{0, 3}});
  SetTensor(&s, "x", bad);
  EXPECT_NE(RunOps({Pool("SUM")}, &s).message().find("does not partition"), std::string::npos);
  EXPECT_NE(RunOps({Pool("MEDIAN")}, &s).message().find("'MEDIAN'"), std::string::npos);
}

}  // namespace
}  // namespace oar::testing
