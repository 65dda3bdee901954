// auc and layers::auc: the global AUC equals the exact pairwise AUC of
// every batch so far (predictions in distinct buckets), the batch AUC that
// of the last slide_steps batches; bad probabilities and an unimplemented
// curve are errors naming them.
#include <vector>

#include "common/api/layers.h"
#include "common/api/unique_name.h"
#include "common/framework/executor.h"
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar {
namespace {

// The fraction of (positive, negative) pairs ranked right (ties count half).
double ExactAuc(const std::vector<float>& p, const std::vector<int64_t>& y) {
  double right = 0, pairs = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    for (size_t j = 0; j < p.size(); ++j) {
      if (y[i] == 1 && y[j] == 0) {
        pairs += 1;
        right += p[i] > p[j] ? 1 : (p[i] == p[j] ? 0.5 : 0);
      }
    }
  }
  return right / pairs;
}

struct AucNet {
  UniqueNameGuard names;
  Program main, startup;
  layers::AucVars auc;
  explicit AucNet(int32_t slide_steps, const std::string& curve = "ROC") {
    ProgramGuard g(&main, &startup);
    Var predict = layers::data("predict", {2});
    Var label = layers::data("label", {1}, DataType::kInt64);
    auc = layers::auc(predict, label, curve, 4095, slide_steps);
  }
  // Feeds the positive probabilities `p` (as [1-p, p] rows) with labels `y`.
  absl::StatusOr<std::vector<double>> Run(Executor& exe, Scope* scope, const std::vector<float>& p,
                                          const std::vector<int64_t>& y) {
    std::vector<float> rows;
    for (float v : p) {
      rows.push_back(1 - v);
      rows.push_back(v);
    }
    const int64_t n = static_cast<int64_t>(p.size());
    auto out = exe.Run(main.desc(), scope,
                       {{"predict", MakeTensor<float>({n, 2}, rows)}, {"label", MakeTensor<int64_t>({n, 1}, y)}},
                       {auc.auc.name(), auc.batch_auc.name()});
    if (!out.ok()) return out.status();
    return std::vector<double>{(*out)[0].data<double>()[0], (*out)[1].data<double>()[0]};
  }
};

TEST(AucOpTest, GlobalAucCoversEveryBatchAndBatchAucTheWindow) {
  AucNet net(/*slide_steps=*/2);
  ASSERT_TRUE(net.main.status().ok()) << net.main.status();
  // Two auc ops, Fluid's: the batch one (slide_steps 2) then the global one (0).
  const BlockDesc& b = net.main.desc().Block(0);
  ASSERT_EQ(b.OpSize(), 2u);
  EXPECT_EQ(b.Op(0).GetAttr<int32_t>("slide_steps"), 2);
  EXPECT_EQ(b.Op(1).GetAttr<int32_t>("slide_steps"), 0);
  EXPECT_EQ(b.Op(1).Output("StatPosOut")[0], b.Op(1).Input("StatPos")[0]) << "counts are updated in place";
  Executor exe;
  Scope scope;
  ASSERT_TRUE(exe.Run(net.startup.desc(), &scope).ok());
  const std::vector<std::vector<float>> p = {{0.9f, 0.3f, 0.7f, 0.1f}, {0.8f, 0.2f, 0.6f}, {0.35f, 0.95f, 0.5f}};
  const std::vector<std::vector<int64_t>> y = {{1, 1, 0, 0}, {0, 1, 1}, {1, 0, 0}};
  std::vector<float> all_p, window_p;
  std::vector<int64_t> all_y, window_y;
  for (size_t k = 0; k < p.size(); ++k) {
    auto got = net.Run(exe, &scope, p[k], y[k]);
    ASSERT_TRUE(got.ok()) << got.status();
    all_p.insert(all_p.end(), p[k].begin(), p[k].end());
    all_y.insert(all_y.end(), y[k].begin(), y[k].end());
    window_p.assign(p[k].begin(), p[k].end());
    window_y.assign(y[k].begin(), y[k].end());
    if (k > 0) {  // the window holds this batch and the one before
      window_p.insert(window_p.end(), p[k - 1].begin(), p[k - 1].end());
      window_y.insert(window_y.end(), y[k - 1].begin(), y[k - 1].end());
    }
    EXPECT_NEAR((*got)[0], ExactAuc(all_p, all_y), 1e-12) << "global, after batch " << k;
    EXPECT_NEAR((*got)[1], ExactAuc(window_p, window_y), 1e-12) << "batch window, after batch " << k;
  }
}

// Counts whose buffer another owner shares (a value handed out and still
// held): the in-place update gets a fresh buffer, and must start it from
// the counts so far.
TEST(AucOpTest, CountsSharedWithAnotherOwnerAreKept) {
  std::vector<int64_t> start(11, 0);
  start[2] = 5;  // five positives seen before, in bucket 2
  Tensor held = MakeTensor<int64_t>({1, 11}, start);
  Scope s;
  testing::SetTensor(&s, "pos", held);  // shares held's buffer
  testing::SetTensor(&s, "neg", MakeTensor<int64_t>({1, 11}, std::vector<int64_t>(11, 0)));
  testing::SetTensor(&s, "p", MakeTensor<float>({2, 2}, {0.05f, 0.95f, 0.6f, 0.4f}));
  testing::SetTensor(&s, "y", MakeTensor<int64_t>({2, 1}, {1, 0}));
  ASSERT_TRUE(
      testing::RunOps(
          {testing::MakeOp("auc", {{"Predict", {"p"}}, {"Label", {"y"}}, {"StatPos", {"pos"}}, {"StatNeg", {"neg"}}},
                           {{"AUC", {"a"}}, {"StatPosOut", {"pos"}}, {"StatNegOut", {"neg"}}},
                           {{"num_thresholds", int32_t{10}}, {"slide_steps", int32_t{0}}})},
          &s)
          .ok());
  std::vector<int64_t> want = start;
  want[9] += 1;  // the positive at 0.95
  EXPECT_EQ(TensorToVector<int64_t>(testing::GetTensor(s, "pos")), want);
  EXPECT_EQ(TensorToVector<int64_t>(held), start) << "the other owner's values changed";
}

TEST(AucOpTest, ProbabilitiesOutsideZeroOneAndOtherCurvesAreErrors) {
  AucNet net(1);
  Executor exe;
  Scope scope;
  ASSERT_TRUE(exe.Run(net.startup.desc(), &scope).ok());
  auto bad = net.Run(exe, &scope, {0.5f, 1.5f}, {1, 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("auc"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("not a probability"), std::string::npos) << bad.status();
  AucNet pr(1, "PR");
  EXPECT_FALSE(pr.main.status().ok());
  EXPECT_NE(pr.main.status().message().find("curve 'PR' is not implemented"), std::string::npos) << pr.main.status();
}

}  // namespace
}  // namespace oar
