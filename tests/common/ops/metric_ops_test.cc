#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

TEST(TopKOpTest, ReturnsLargestValuesAndIndices) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 4}, {0.1f, 0.7f, 0.2f, 0.9f, 5, 4, 3, 2}));
  ASSERT_TRUE(
      RunOps({MakeOp("top_k", {{"X", {"x"}}}, {{"Out", {"v"}}, {"Indices", {"i"}}}, {{"k", int32_t{2}}})}, &s).ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "v")), (std::vector<float>{0.9f, 0.7f, 5, 4}));
  EXPECT_EQ(TensorToVector<int64_t>(GetTensor(s, "i")), (std::vector<int64_t>{3, 1, 0, 1}));
}

TEST(TopKOpTest, RejectsKLargerThanLastDimension) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({2, 3}, 0, 1, 1));
  EXPECT_FALSE(
      RunOps({MakeOp("top_k", {{"X", {"x"}}}, {{"Out", {"v"}}, {"Indices", {"i"}}}, {{"k", int32_t{4}}})}, &s).ok());
}

TEST(AccuracyOpTest, CountsTopKHits) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({3, 3}, {0.1f, 0.8f, 0.1f, 0.6f, 0.3f, 0.1f, 0.2f, 0.3f, 0.5f}));
  SetTensor(&s, "label", MakeTensor<int64_t>({3, 1}, {1, 1, 2}));
  ASSERT_TRUE(RunOps({MakeOp("top_k", {{"X", {"x"}}}, {{"Out", {"v"}}, {"Indices", {"i"}}}),
                      MakeOp("accuracy", {{"Out", {"v"}}, {"Indices", {"i"}}, {"Label", {"label"}}},
                             {{"Accuracy", {"acc"}}, {"Correct", {"c"}}, {"Total", {"t"}}})},
                     &s)
                  .ok());
  EXPECT_FLOAT_EQ(GetTensor(s, "acc").data<float>()[0], 2.0f / 3.0f);
  EXPECT_EQ(GetTensor(s, "c").data<int32_t>()[0], 2);
  EXPECT_EQ(GetTensor(s, "t").data<int32_t>()[0], 3);
}

}  // namespace
}  // namespace oar::testing
