// MergeGrads: the communicator's merge of a variable's queued gradients.
#include "trainer/grad_merge.h"

#include "gtest/gtest.h"

namespace oar {
namespace {

Variable Dense(std::vector<float> v) {
  Variable out;
  *out.GetMutable<Tensor>() = MakeTensor<float>({static_cast<int64_t>(v.size())}, v);
  return out;
}

Variable Sparse(std::vector<int64_t> rows, std::vector<float> values, int64_t height = 10) {
  Variable out;
  SelectedRows* s = out.GetMutable<SelectedRows>();
  s->rows = std::move(rows);
  s->height = height;
  s->value = MakeTensor<float>({static_cast<int64_t>(s->rows.size()), 2}, values);
  return out;
}

TEST(GradMergeTest, DenseValuesAreSummedOrAveraged) {
  Variable a = Dense({1, 2}), b = Dense({3, 6});
  auto sum = MergeGrads("g", {&a, &b});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(TensorToVector<float>(sum->Get<Tensor>()), (std::vector<float>{4, 8}));
  auto mean = MergeGrads("g", {&a, &b}, {.average = true});
  ASSERT_TRUE(mean.ok());
  EXPECT_EQ(TensorToVector<float>(mean->Get<Tensor>()), (std::vector<float>{2, 4}));
  EXPECT_EQ(TensorToVector<float>(a.Get<Tensor>()), (std::vector<float>{1, 2}));  // inputs untouched
}

TEST(GradMergeTest, SparseRowsAreStackedAndRepeatedRowsSummed) {
  Variable a = Sparse({3, 1}, {1, 1, 2, 2}), b = Sparse({1}, {10, 20});
  auto merged = MergeGrads("emb@GRAD", {&a, &b});
  ASSERT_TRUE(merged.ok()) << merged.status();
  const SelectedRows& s = merged->Get<SelectedRows>();
  EXPECT_EQ(s.rows, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(s.height, 10);
  EXPECT_EQ(TensorToVector<float>(s.value), (std::vector<float>{12, 22, 1, 1}));
  auto stacked = MergeGrads("emb@GRAD", {&a, &b}, {.average = true, .merge_rows = false});
  ASSERT_TRUE(stacked.ok());
  EXPECT_EQ(stacked->Get<SelectedRows>().rows, (std::vector<int64_t>{3, 1, 1}));
  EXPECT_EQ(TensorToVector<float>(stacked->Get<SelectedRows>().value), (std::vector<float>{0.5, 0.5, 1, 1, 5, 10}));
}

TEST(GradMergeTest, MismatchedValuesAreRefusedNamingTheVariable) {
  Variable a = Dense({1, 2}), b = Dense({1, 2, 3}), c = Sparse({1}, {1, 1}), d = Sparse({1}, {1, 1}, 5);
  for (const auto& [x, y] : std::vector<std::pair<Variable*, Variable*>>{{&a, &b}, {&a, &c}, {&c, &d}}) {
    auto r = MergeGrads("fc_0.w_0@GRAD", {x, y});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("'fc_0.w_0@GRAD'"), std::string::npos) << r.status();
  }
  EXPECT_FALSE(MergeGrads("g", {}).ok());
}

}  // namespace
}  // namespace oar
