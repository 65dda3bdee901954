// Programs written by PaddlePaddle 2.6 itself (tests/paddle_fixtures/
// make_fixtures.py; committed under tests/testdata/paddle/): each loads
// unmodified, starts from Paddle's own initial persistables (per-variable
// files or one combined file), trains on the same fixed batches, and its
// losses equal the ones Paddle recorded, step for step.
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/paddle/paddle_fixture.h"

namespace oar {
namespace {

using paddle_fixture::Fixture;
using paddle_fixture::kDir;
using paddle_fixture::Load;
using paddle_fixture::Train;

class PaddleFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PaddleFixtureTest, TrainsToPaddlesOwnLosses) {
  const Fixture f = Load(GetParam());
  ASSERT_TRUE(f.main && f.startup);
  ASSERT_EQ(f.losses.size(), static_cast<size_t>(f.steps));
  const std::vector<double> got = Train(GetParam(), f);
  ASSERT_EQ(got.size(), f.losses.size());
  const size_t exact_steps = paddle_fixture::ExactSteps(GetParam(), got.size());  // every other model: all, 1e-5
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = i < exact_steps ? 1e-5 : 1e-2;
    EXPECT_NEAR(got[i], f.losses[i], tol * std::abs(f.losses[i])) << "step " << i;
  }
  paddle_fixture::ReportMaxRelativeError(std::vector<double>(got.begin(), got.begin() + exact_steps),
                                         std::vector<double>(f.losses.begin(), f.losses.begin() + exact_steps));
}

INSTANTIATE_TEST_SUITE_P(Models, PaddleFixtureTest, ::testing::ValuesIn(paddle_fixture::kTrainingFixtures));

// The first op of `type` in block 0.
OpDesc* FirstOp(ProgramDesc* p, const std::string& type) {
  BlockDesc* b = p->MutableBlock(0);
  for (size_t i = 0; i < b->OpSize(); ++i) {
    if (b->Op(i).type == type) return b->MutableOp(i);
  }
  ADD_FAILURE() << "no " << type;
  return nullptr;
}

// What Oar does not implement is refused with op, slot or attribute and
// value named, never ignored: a variable in an optional input the kernel
// does not read, an attribute value that changes the maths.
TEST(PaddleFixtureErrors, UnimplementedInputsAndAttributeValuesAreRefused) {
  struct Case {
    std::string op, want;
    std::function<void(OpDesc*)> edit;
    std::string model = "mlp";
  };
  const std::vector<Case> cases = {
      {"adam", "adam: input slot 'Beta1Tensor' is bound to 'learning_rate_0', which Oar's adam does not implement",
       [](OpDesc* op) { op->inputs["Beta1Tensor"] = {"learning_rate_0"}; }},
      {"adam", "adam: attribute use_global_beta_pow=true is not implemented (Oar implements use_global_beta_pow=false)",
       [](OpDesc* op) { op->attrs["use_global_beta_pow"] = true; }},
      {"adam", "adam: output slot 'MasterParamOut' is bound to 'fc_0.w_0'",
       [](OpDesc* op) { op->outputs["MasterParamOut"] = {"fc_0.w_0"}; }},
      {"top_k_v2", "top_k_v2: input slot 'K' is bound to 'fc_0.w_0', which Oar's top_k_v2 does not implement",
       [](OpDesc* op) { op->inputs["K"] = {"fc_0.w_0"}; }},
      {"conv2d", "conv2d: attribute padding_algorithm=\"SAME\" is not implemented",
       [](OpDesc* op) { op->attrs["padding_algorithm"] = std::string("SAME"); }, "zoo"},
      {"batch_norm", "batch_norm: input slot 'MomentumTensor' is bound to 'zoo_b'",
       [](OpDesc* op) { op->inputs["MomentumTensor"] = {"zoo_b"}; }, "zoo"},
      {"reduce_sum", "reduce_sum: attribute out_dtype=6 is not implemented",
       [](OpDesc* op) { op->attrs["out_dtype"] = int32_t{6}; }, "zoo"},
      {"dropout", "dropout: input slot 'Seed' is bound to 'label'", [](OpDesc* op) { op->inputs["Seed"] = {"label"}; },
       "probs"},
      {"reshape2", "reshape2: input slot 'Shape' is bound to 'zoo_b'",
       [](OpDesc* op) { op->inputs["Shape"] = {"zoo_b"}; }, "zoo"},
  };
  for (const Case& c : cases) {
    Fixture f = Load(c.model);
    ASSERT_TRUE(f.main && f.startup);
    OpDesc* op = FirstOp(f.main.get(), c.op);
    ASSERT_NE(op, nullptr);
    c.edit(op);
    Executor exe;
    Scope scope;
    ASSERT_TRUE(exe.Run(*f.startup, &scope).ok());
    FeedMap feed;
    for (const std::string& name : f.feeds) {
      const std::string path = kDir + c.model + "/batch_0." + name;
      std::ifstream in(path, std::ios::binary);
      ASSERT_TRUE(ReadLoDTensor(in, path, &feed[name]).ok());
    }
    auto out = exe.Run(*f.main, &scope, feed, {f.loss});
    ASSERT_FALSE(out.ok()) << c.want;
    EXPECT_NE(std::string(out.status().message()).find(c.want), std::string::npos) << out.status();
  }
}

}  // namespace
}  // namespace oar
