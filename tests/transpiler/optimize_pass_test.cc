#include "transpiler/optimize_pass.h"

#include "common/api/layers.h"
#include "common/api/learning_rate_scheduler.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(OptimizePassTest, FindsParamGradPairsOptimizeAndLrOpsAsFluidDoes) {
  UniqueNameGuard names;
  Program main, startup;
  ProgramGuard g(&main, &startup);
  Var x = layers::data("x", {4});
  Var y = layers::data("y", {1});
  Var loss = layers::mean(layers::square_error_cost(layers::fc(layers::fc(x, 8, "relu"), 1), y));
  Var lr = layers::exponential_decay(0.1f, 10, 0.5f, true);
  optimizer::Momentum opt(0.1f, 0.9f);
  opt.set_learning_rate(lr);
  opt.minimize(loss);
  ASSERT_TRUE(main.status().ok()) << main.status();
  const BlockDesc& b = main.desc().Block(0);
  OptimizePass pass = FindOptimizePass(b);
  // Two fc layers: weight and bias each.
  ASSERT_EQ(pass.params_grads.size(), 4u);
  for (const auto& [p, grad] : pass.params_grads) EXPECT_EQ(grad, p + "@GRAD");
  ASSERT_EQ(pass.optimize_ops.size(), 4u);
  for (size_t i : pass.optimize_ops) EXPECT_EQ(b.Op(i).type, "momentum");
  // The decay's ops are LR ops, not optimize ops.
  ASSERT_FALSE(pass.lr_ops.empty());
  for (size_t i : pass.lr_ops) EXPECT_TRUE(b.Op(i).role() & static_cast<int32_t>(OpRole::kLRSched)) << b.Op(i).type;
  for (size_t i : pass.lr_ops) EXPECT_LT(i, pass.optimize_ops.front());
}

}  // namespace
}  // namespace oar
