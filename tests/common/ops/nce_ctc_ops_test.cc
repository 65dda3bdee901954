// nce draws the negatives PaddlePaddle 2.6.2 draws for the same seed (the
// reference rows below are what Paddle's SampleLabels held, from
// paddle.static.nn.nce with the same arguments), and its gradients and
// warpctc's agree with central differences.
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

template <typename T>
Tensor Of(DDim d, std::vector<T> v) {
  Tensor t;
  std::copy(v.begin(), v.end(), t.mutable_data<T>(d));
  return t;
}

std::vector<int64_t> SampleLabels(const OpDesc& op, const std::map<std::string, Tensor>& in) {
  Scope s;
  for (const auto& [name, t] : in) SetTensor(&s, name, t);
  absl::Status st = RunOps({op}, &s);
  EXPECT_TRUE(st.ok()) << st;
  const Tensor& l = GetTensor(s, "labels");
  return std::vector<int64_t>(l.data<int64_t>(), l.data<int64_t>() + l.numel());
}

OpDesc Nce(int32_t classes, int32_t negs, int32_t sampler, int32_t seed, OpDesc::VarMap extra = {}) {
  OpDesc::VarMap in{{"Input", {"x"}}, {"Label", {"y"}}, {"Weight", {"w"}}, {"Bias", {"b"}}};
  in.insert(extra.begin(), extra.end());
  return MakeOp("nce", in, {{"Cost", {"cost"}}, {"SampleLogits", {"logits"}}, {"SampleLabels", {"labels"}}},
                {{"num_total_classes", classes}, {"num_neg_samples", negs}, {"sampler", sampler}, {"seed", seed}});
}

TEST(NceOpTest, UniformNegativesAreThoseOfPaddle) {
  const std::vector<int64_t> got = SampleLabels(Nce(100, 5, 0, 1), {{"x", RandomTensor<float>({4, 8}, -1, 1, 1)},
                                                                    {"y", Of<int64_t>({4, 1}, {0, 1, 2, 3})},
                                                                    {"w", RandomTensor<float>({100, 8}, -1, 1, 2)},
                                                                    {"b", RandomTensor<float>({100}, -1, 1, 3)}});
  const std::vector<int64_t> paddle = {0, 13, 13, 45, 2,  35, 1, 91, 47, 7,  56, 63,
                                       2, 8,  55, 78, 22, 41, 3, 24, 29, 80, 47, 26};
  EXPECT_EQ(got, paddle);
}

TEST(NceOpTest, CustomDistributionNegativesAreThoseOfPaddle) {
  // custom_dist [0.05, 0.3, 0.1, 0.25, 0.2, 0.1]: Paddle's alias tables.
  const std::vector<int64_t> got = SampleLabels(
      Nce(6, 4, 2, 3, {{"CustomDistProbs", {"p"}}, {"CustomDistAlias", {"a"}}, {"CustomDistAliasProbs", {"ap"}}}),
      {{"x", RandomTensor<float>({3, 4}, -1, 1, 1)},
       {"y", Of<int64_t>({3, 1}, {0, 1, 2})},
       {"w", RandomTensor<float>({6, 4}, -1, 1, 2)},
       {"b", RandomTensor<float>({6}, -1, 1, 3)},
       {"p", Of<float>({6}, {0.05f, 0.3f, 0.1f, 0.25f, 0.2f, 0.1f})},
       {"a", Of<int32_t>({6}, {1, 3, 3, -1, 1, 4})},
       {"ap", Of<float>({6}, {0.3f, 0.9f, 0.6f, 1.0f, 0.8f, 0.6f})}});
  EXPECT_EQ(got, (std::vector<int64_t>{0, 3, 3, 3, 4, 1, 4, 1, 3, 1, 2, 1, 5, 2, 0}));
}

TEST(NceOpTest, GradientsMatchCentralDifferences) {
  for (int32_t sampler : {0, 1}) {
    SCOPED_TRACE(sampler);
    ExpectGradientsMatch<double>(Nce(12, 3, sampler, 7),
                                 {{"x", RandomTensor<double>({4, 5}, -1, 1, 1)},
                                  {"y", Of<int64_t>({4, 1}, {3, 0, 11, 5})},
                                  {"w", RandomTensor<double>({12, 5}, -1, 1, 2)},
                                  {"b", RandomTensor<double>({12}, -1, 1, 3)}},
                                 {"x", "w", "b"}, {.loss_outputs = {"cost"}});
  }
}

TEST(WarpCtcOpTest, GradientMatchesCentralDifferencesWithLoD) {
  Tensor logits = RandomTensor<double>({7, 4}, -2, 2, 5);
  logits.set_lod({{0, 3, 7}});
  Tensor label = Of<int32_t>({3, 1}, {2, 1, 1});  // sequence 1 repeats a label: needs a blank between
  label.set_lod({{0, 1, 3}});
  ExpectGradientsMatch<double>(
      MakeOp("warpctc", {{"Logits", {"x"}}, {"Label", {"l"}}}, {{"Loss", {"loss"}}, {"WarpCTCGrad", {"g"}}},
             {{"blank", int32_t{0}}, {"norm_by_times", false}}),
      {{"x", logits}, {"l", label}}, {"x"}, {.loss_outputs = {"loss"}});
}

// (norm_by_times scales the gradient, not the loss, as in Paddle: checked
// against central differences only without it.)
TEST(WarpCtcOpTest, GradientMatchesCentralDifferencesPadded) {
  ExpectGradientsMatch<double>(
      MakeOp("warpctc", {{"Logits", {"x"}}, {"Label", {"l"}}, {"LogitsLength", {"xl"}}, {"LabelLength", {"ll"}}},
             {{"Loss", {"loss"}}, {"WarpCTCGrad", {"g"}}}, {{"blank", int32_t{3}}, {"norm_by_times", false}}),
      {{"x", RandomTensor<double>({5, 2, 4}, -2, 2, 6)},
       {"l", Of<int32_t>({2, 2}, {0, 2, 1, 0})},
       {"xl", Of<int64_t>({2}, {5, 4})},
       {"ll", Of<int64_t>({2}, {2, 1})}},
      {"x"}, {.loss_outputs = {"loss"}});
}

}  // namespace
}  // namespace oar::testing
