#include "common/framework/selected_rows_util.h"
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

OpDesc Lookup(bool sparse, int64_t padding_idx = -1) {
  return MakeOp("lookup_table", {{"W", {"w"}}, {"Ids", {"ids"}}}, {{"Out", {"out"}}},
                {{"is_sparse", sparse}, {"padding_idx", padding_idx}});
}

TEST(LookupTableOpTest, GathersRowsAndZeroesPadding) {
  Scope s;
  SetTensor(&s, "w", MakeTensor<float>({3, 2}, {1, 2, 3, 4, 5, 6}));
  SetTensor(&s, "ids", MakeTensor<int64_t>({4, 1}, {2, 0, 1, 2}));
  ASSERT_TRUE(RunOps({Lookup(false, 1)}, &s).ok());
  EXPECT_EQ(GetTensor(s, "out").dims(), (DDim{4, 2}));
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "out")), (std::vector<float>{5, 6, 1, 2, 0, 0, 5, 6}));
}

TEST(LookupTableOpTest, DenseAndSparseGradientsMatchNumeric) {
  for (bool sparse : {false, true}) {
    SCOPED_TRACE(sparse);
    ExpectGradientsMatch<double>(
        Lookup(sparse, 3),
        {{"w", RandomTensor<double>({5, 3}, -1, 1, 1)}, {"ids", MakeTensor<int64_t>({4, 1}, {1, 4, 1, 3})}}, {"w"});
  }
}

TEST(LookupTableOpTest, SparseGradientIsSelectedRows) {
  Scope s;
  SetTensor(&s, "w", RandomTensor<float>({10, 2}, -1, 1, 1));
  SetTensor(&s, "ids", MakeTensor<int64_t>({3, 1}, {7, 2, 7}));
  SetTensor(&s, "out@GRAD", MakeTensor<float>({3, 2}, {1, 1, 2, 2, 3, 3}));
  OpDesc grad = MakeOp("lookup_table_grad", {{"W", {"w"}}, {"Ids", {"ids"}}, {"Out@GRAD", {"out@GRAD"}}},
                       {{"W@GRAD", {"w@GRAD"}}}, {{"is_sparse", true}});
  ASSERT_TRUE(RunOps({grad}, &s).ok());
  const Variable* g = s.FindVar("w@GRAD");
  ASSERT_TRUE(g->IsType<SelectedRows>());
  EXPECT_EQ(g->Get<SelectedRows>().rows, (std::vector<int64_t>{7, 2, 7}));
  EXPECT_EQ(g->Get<SelectedRows>().height, 10);
}

TEST(LookupTableOpTest, BadIdsAreErrors) {
  Scope s;
  SetTensor(&s, "w", RandomTensor<float>({3, 2}, -1, 1, 1));
  SetTensor(&s, "ids", MakeTensor<int64_t>({2, 1}, {0, 5}));
  EXPECT_NE(RunOps({Lookup(false)}, &s).message().find("id 5 at position 1"), std::string::npos);
  SetTensor(&s, "ids", MakeTensor<int32_t>({2, 1}, {0, 1}));
  EXPECT_NE(RunOps({Lookup(false)}, &s).message().find("Ids must be int64"), std::string::npos);
  SetTensor(&s, "ids", MakeTensor<int64_t>({2, 2}, {0, 1, 1, 0}));
  EXPECT_NE(RunOps({Lookup(false)}, &s).message().find("last dimension 1"), std::string::npos);
}

SelectedRows Sparse(std::vector<int64_t> rows, std::vector<float> values, int64_t height, int64_t width) {
  SelectedRows sr;
  sr.rows = std::move(rows);
  sr.height = height;
  sr.value = MakeTensor<float>({static_cast<int64_t>(sr.rows.size()), width}, values);
  return sr;
}

TEST(SumOpTest, AddsSparseRowsIntoDense) {
  Scope s;
  SetTensor(&s, "d", MakeTensor<float>({3, 2}, {1, 1, 1, 1, 1, 1}));
  *s.Var("sp")->GetMutable<SelectedRows>() = Sparse({2, 0, 2}, {1, 2, 3, 4, 5, 6}, 3, 2);
  ASSERT_TRUE(RunOps({MakeOp("sum", {{"X", {"d", "sp"}}}, {{"Out", {"o"}}})}, &s).ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "o")), (std::vector<float>{4, 5, 1, 1, 7, 9}));
}

// GEO-SGD's pserver block, d = d + rows: added where d lies (its buffer kept)
// when nothing else holds it; with a reader sharing it, a fresh buffer of
// the same sum and the reader's value untouched.
TEST(SumOpTest, SparseRowsAddedInPlaceKeepOrCopyTheBuffer) {
  Scope s;
  SetTensor(&s, "d", MakeTensor<float>({3, 2}, {1, 1, 1, 1, 1, 1}));
  *s.Var("sp")->GetMutable<SelectedRows>() = Sparse({2, 0, 2}, {1, 2, 3, 4, 5, 6}, 3, 2);
  const OpDesc sum = MakeOp("sum", {{"X", {"d", "sp"}}}, {{"Out", {"d"}}});
  const void* before = GetTensor(s, "d").raw_data();
  ASSERT_TRUE(RunOps({sum}, &s).ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "d")), (std::vector<float>{4, 5, 1, 1, 7, 9}));
  EXPECT_EQ(GetTensor(s, "d").raw_data(), before);
  Tensor reader = GetTensor(s, "d");  // shares the buffer, as a Get's reply does
  ASSERT_TRUE(RunOps({sum}, &s).ok());
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "d")), (std::vector<float>{7, 9, 1, 1, 13, 17}));
  EXPECT_EQ(TensorToVector<float>(reader), (std::vector<float>{4, 5, 1, 1, 7, 9}));
}

TEST(SumOpTest, SparseInputsGiveSparseOutputAndMergeCombinesRows) {
  Scope s;
  *s.Var("a")->GetMutable<SelectedRows>() = Sparse({1}, {1, 2}, 4, 2);
  *s.Var("b")->GetMutable<SelectedRows>() = Sparse({3, 1}, {3, 4, 5, 6}, 4, 2);
  ASSERT_TRUE(RunOps({MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"o"}}}),
                      MakeOp("merge_selected_rows", {{"X", {"o"}}}, {{"Out", {"m"}}})},
                     &s)
                  .ok());
  const SelectedRows& o = s.FindVar("o")->Get<SelectedRows>();
  EXPECT_EQ(o.rows, (std::vector<int64_t>{1, 3, 1}));
  const SelectedRows& m = s.FindVar("m")->Get<SelectedRows>();
  EXPECT_EQ(m.rows, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(TensorToVector<float>(m.value), (std::vector<float>{6, 8, 3, 4}));
}

TEST(MergeSelectedRowsOpTest, RowOutsideHeightIsAnError) {
  Scope s;
  *s.Var("a")->GetMutable<SelectedRows>() = Sparse({5}, {1, 2}, 4, 2);
  EXPECT_NE(RunOps({MakeOp("merge_selected_rows", {{"X", {"a"}}}, {{"Out", {"m"}}})}, &s).message().find("row 5"),
            std::string::npos);
}

}  // namespace
}  // namespace oar::testing
