// The runtime split's cuts (trainer/stack_rows.h): a dense gradient into
// views of its blocks' rows, a sparse one into each block's rows,
// renumbered from the block's first row, and the cuts it refuses.
#include "trainer/stack_rows.h"

#include <vector>

#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(SplitByRowsTest, ADenseGradientIsCutIntoViewsOfItsBlocksRows) {
  Variable g;
  Tensor* t = g.GetMutable<Tensor>();
  t->Resize({5, 2});
  float* d = t->mutable_data<float>();
  for (int i = 0; i < 10; ++i) d[i] = static_cast<float>(i);
  auto parts = SplitByRows(g, {3, 2}, "'w@GRAD'");
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ(TensorToVector<float>((*parts)[0].Get<Tensor>()), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(TensorToVector<float>((*parts)[1].Get<Tensor>()), (std::vector<float>{6, 7, 8, 9}));
  EXPECT_EQ((*parts)[1].Get<Tensor>().data<float>(), d + 6);  // a view: no copy
}

TEST(SplitByRowsTest, ASparseGradientIsCutIntoItsBlocksRowsRenumbered) {
  Variable g;
  SelectedRows* s = g.GetMutable<SelectedRows>();
  s->height = 10;
  s->rows = {7, 1, 4, 7, 9};  // unsorted, a duplicate: cut as they come
  s->value.Resize({5, 2});
  float* d = s->value.mutable_data<float>();
  for (int i = 0; i < 10; ++i) d[i] = static_cast<float>(i);
  auto parts = SplitByRows(g, {4, 3, 3}, "'emb@GRAD'");
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);
  const auto& a = (*parts)[0].Get<SelectedRows>();
  const auto& b = (*parts)[1].Get<SelectedRows>();
  const auto& c = (*parts)[2].Get<SelectedRows>();
  EXPECT_EQ(a.height, 4);
  EXPECT_EQ(a.rows, (std::vector<int64_t>{1}));
  EXPECT_EQ(TensorToVector<float>(a.value), (std::vector<float>{2, 3}));
  EXPECT_EQ(b.height, 3);
  EXPECT_EQ(b.rows, (std::vector<int64_t>{0}));  // row 4 of the table
  EXPECT_EQ(TensorToVector<float>(b.value), (std::vector<float>{4, 5}));
  EXPECT_EQ(c.height, 3);
  EXPECT_EQ(c.rows, (std::vector<int64_t>{0, 0, 2}));  // rows 7, 7, 9
  EXPECT_EQ(TensorToVector<float>(c.value), (std::vector<float>{0, 1, 6, 7, 8, 9}));
  // A block no row falls in is sent empty, with the table's row width; so
  // is a block of no rows at all.
  auto none = SplitByRows(g, {1, 0, 9}, "'emb@GRAD'");
  ASSERT_TRUE(none.ok()) << none.status();
  ASSERT_EQ(none->size(), 3u);
  for (size_t b : {0u, 1u}) {
    EXPECT_TRUE((*none)[b].Get<SelectedRows>().rows.empty()) << b;
    EXPECT_EQ((*none)[b].Get<SelectedRows>().value.dims(), (DDim{0, 2})) << b;
  }
  EXPECT_EQ((*none)[1].Get<SelectedRows>().height, 0);
  EXPECT_EQ((*none)[2].Get<SelectedRows>().rows, (std::vector<int64_t>{6, 0, 3, 6, 8}));
}

TEST(SplitByRowsTest, SectionsThatDoNotCutTheRowsAreRefusedNamingTheVariable) {
  Variable dense;
  dense.GetMutable<Tensor>()->Resize({4, 2});
  dense.GetMutable<Tensor>()->mutable_data<float>();
  auto s = SplitByRows(dense, {3, 2}, "send: 'w@GRAD'");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("sections [3, 2] do not cut the 4 rows of send: 'w@GRAD'"), std::string::npos)
      << s.status();
  Variable sparse;
  SelectedRows* r = sparse.GetMutable<SelectedRows>();
  r->height = 4;
  r->rows = {5};
  r->value.Resize({1, 2});
  r->value.mutable_data<float>();
  s = SplitByRows(sparse, {2, 2}, "'emb@GRAD'");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("'emb@GRAD': row 5 is outside [0, 4)"), std::string::npos) << s.status();
  r->rows = {1, 2};  // two rows listed, one row of values
  s = SplitByRows(sparse, {2, 2}, "'emb@GRAD'");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << "a malformed SelectedRows is refused";
}

}  // namespace
}  // namespace oar
