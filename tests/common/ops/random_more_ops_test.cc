// The sampling ops (random_more_ops.cc) draw from the distributions Paddle
// documents; their streams are Oar's own, so the checks are statistical
// (fixed seeds, tolerances of several standard errors) and structural.
#include <algorithm>
#include <numeric>
#include <set>

#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar {
namespace {

using testing::GetTensor;
using testing::MakeOp;
using testing::RunOps;
using testing::SetTensor;

TEST(RandomMoreOps, BernoulliMatchesItsProbabilities) {
  Scope scope;
  Tensor p;
  float* pp = p.mutable_data<float>(DDim{20000});
  for (int i = 0; i < 20000; ++i) pp[i] = i < 10000 ? 0.2f : (i < 15000 ? 0.0f : 1.0f);
  SetTensor(&scope, "p", p);
  ASSERT_TRUE(RunOps({MakeOp("bernoulli", {{"X", {"p"}}}, {{"Out", {"o"}}}, {})}, &scope).ok());
  const float* o = GetTensor(scope, "o").data<float>();
  const double mean = std::accumulate(o, o + 10000, 0.0) / 10000;
  EXPECT_NEAR(mean, 0.2, 0.02);  // 5 standard errors
  EXPECT_EQ(std::accumulate(o + 10000, o + 15000, 0.0), 0.0);
  EXPECT_EQ(std::accumulate(o + 15000, o + 20000, 0.0), 5000.0);
}

TEST(RandomMoreOps, RandpermIsAPermutationAndRandintStaysInRange) {
  Scope scope;
  ASSERT_TRUE(RunOps({MakeOp("randperm", {}, {{"Out", {"perm"}}}, {{"n", int32_t{50}}, {"dtype", int32_t{3}}}),
                      MakeOp("randint", {}, {{"Out", {"ints"}}},
                             {{"shape", std::vector<int64_t>{4000}},
                              {"low", int32_t{-3}},
                              {"high", int32_t{5}},
                              {"dtype", int32_t{3}},
                              {"seed", int32_t{7}}})},
                     &scope)
                  .ok());
  const Tensor& perm = GetTensor(scope, "perm");
  std::vector<int64_t> v(perm.data<int64_t>(), perm.data<int64_t>() + perm.numel());
  std::sort(v.begin(), v.end());
  std::vector<int64_t> want(50);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(v, want);
  const Tensor& ints = GetTensor(scope, "ints");
  std::set<int64_t> seen(ints.data<int64_t>(), ints.data<int64_t>() + ints.numel());
  EXPECT_EQ(*seen.begin(), -3);
  EXPECT_EQ(*seen.rbegin(), 4);  // high is exclusive; 4000 draws reach both ends
  EXPECT_EQ(seen.size(), 8u);
}

TEST(RandomMoreOps, MultinomialWithoutReplacementDrawsDistinctPossibleIds) {
  Scope scope;
  Tensor w;
  float* wp = w.mutable_data<float>(DDim{100, 5});
  for (int r = 0; r < 100; ++r) {
    for (int c = 0; c < 5; ++c) wp[r * 5 + c] = c == 2 ? 0.0f : 1.0f + c;  // id 2 impossible
  }
  SetTensor(&scope, "w", w);
  ASSERT_TRUE(RunOps({MakeOp("multinomial", {{"X", {"w"}}}, {{"Out", {"ids"}}},
                             {{"num_samples", int32_t{4}}, {"replacement", false}})},
                     &scope)
                  .ok());
  const Tensor& ids = GetTensor(scope, "ids");
  ASSERT_EQ(ids.dims(), (DDim{100, 4}));
  for (int r = 0; r < 100; ++r) {
    std::set<int64_t> row(ids.data<int64_t>() + r * 4, ids.data<int64_t>() + r * 4 + 4);
    EXPECT_EQ(row, (std::set<int64_t>{0, 1, 3, 4})) << "row " << r;
  }
}

TEST(RandomMoreOps, SamplingIdFollowsTheRowsProbabilities) {
  Scope scope;
  Tensor p;
  float* pp = p.mutable_data<float>(DDim{8000, 3});
  for (int r = 0; r < 8000; ++r) pp[r * 3] = 0.5f, pp[r * 3 + 1] = 0.0f, pp[r * 3 + 2] = 0.5f;
  SetTensor(&scope, "p", p);
  ASSERT_TRUE(RunOps({MakeOp("sampling_id", {{"X", {"p"}}}, {{"Out", {"id"}}}, {{"seed", int32_t{3}}})}, &scope).ok());
  const Tensor& id = GetTensor(scope, "id");
  const int64_t zeros = std::count(id.data<int64_t>(), id.data<int64_t>() + 8000, 0);
  EXPECT_EQ(std::count(id.data<int64_t>(), id.data<int64_t>() + 8000, 1), 0);
  EXPECT_NEAR(zeros / 8000.0, 0.5, 0.03);
}

}  // namespace
}  // namespace oar
