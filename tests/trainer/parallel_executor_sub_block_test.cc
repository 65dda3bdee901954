// Sub-blocks (conditional_block) run by a ParallelExecutor whose threads
// outnumber its places: any worker takes any ready op, so independent
// conditional blocks of one place run at the same time, and each prepares its sub-block on first use. This runs
// under ThreadSanitizer in CI (trainer_tests are labelled concurrent), which
// reports the unguarded first use; the values are checked on every build.
#include <vector>

#include "common/api/control_flow.h"
#include "common/api/layers.h"
#include "common/api/unique_name.h"
#include "gtest/gtest.h"
#include "tests/trainer/mlp_fixture.h"
#include "trainer/parallel_executor.h"
#include "trainer/places.h"

namespace oar {
namespace {

constexpr int kBlocks = 6;

struct CondNet {
  Program main, startup;
  Var loss;
  std::vector<Var> outs;  // outs[k] = (k + 1) * loss, each set inside a block of its own
};

void Build(CondNet* n) {
  UniqueNameGuard names;
  ProgramGuard g(&n->main, &n->startup);
  Var x = layers::data("x", {-1, 1});
  n->loss = layers::mean(x);
  Var zero = layers::fill_constant({1}, DataType::kFloat32, 0.0f);
  for (int k = 0; k < kBlocks; ++k) {
    Var out = layers::fill_constant({1}, DataType::kFloat32, -1.0f);
    Var cond = layers::less_than(zero, layers::fill_constant({1}, DataType::kFloat32, 1.0f + k));  // always true
    {
      layers::ConditionalBlockGuard block({cond}, /*is_scalar_condition=*/true);
      layers::assign(layers::scale(n->loss, static_cast<float>(k + 1)), out);
    }
    n->outs.push_back(out);
  }
}

TEST(ParallelExecutorSubBlockTest, IndependentConditionalBlocksOnOnePlaceRunAtOnce) {
  CondNet n;
  Build(&n);
  ASSERT_TRUE(n.main.status().ok()) << n.main.status();
  std::vector<std::string> fetch;
  for (const Var& v : n.outs) fetch.push_back(v.name());
  ExecutionStrategy exec;
  exec.num_threads = 4;  // more threads than places: one place's independent ops overlap
  // Each executor prepares its sub-blocks on its first step: make several.
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE(round);
    Executor exe;
    Scope scope;
    ASSERT_TRUE(exe.Run(n.startup.desc(), &scope).ok());
    auto pe = ParallelExecutor::Create(CpuPlaces(2), n.loss.name(), n.main.desc(), &scope, {}, exec);
    ASSERT_TRUE(pe.ok()) << pe.status();
    for (int step = 0; step < 3; ++step) {
      // Two examples a place; each place's loss is the mean of its own.
      const std::vector<float> x = {1.0f + step, 2.0f * round, -3.0f, 0.5f * step};
      auto r = (*pe)->Run(fetch, FeedMap{{"x", MakeTensor<float>({4, 1}, x)}});
      ASSERT_TRUE(r.ok()) << r.status();
      for (int k = 0; k < kBlocks; ++k) {
        const std::vector<float> got = TensorToVector<float>((*r)[k]);  // one value a place
        ASSERT_EQ(got.size(), 2u) << fetch[k];
        EXPECT_FLOAT_EQ(got[0], (k + 1) * (x[0] + x[1]) / 2) << fetch[k];
        EXPECT_FLOAT_EQ(got[1], (k + 1) * (x[2] + x[3]) / 2) << fetch[k];
      }
    }
  }
}

}  // namespace
}  // namespace oar
