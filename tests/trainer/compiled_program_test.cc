// CompiledProgram, share_vars_from, num_iteration_per_run, the
// fuse_elewise_add_act pass and the Graphviz dump, through the same calls a
// user makes.
#include "trainer/compiled_program.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/trainer/mlp_fixture.h"
#include "trainer/fuse_elewise_add_act_pass.h"
#include "trainer/places.h"

namespace oar {
namespace {

struct Run10 {
  std::vector<float> losses;
  std::vector<float> w;  // fc_0.w_0 on the last place after 10 steps
};

Run10 Train(const std::string& act, size_t places, BuildStrategy build, ExecutionStrategy exec = {}, int runs = 10) {
  Mlp m(false, act);
  Executor exe;
  Scope scope;
  EXPECT_TRUE(exe.Run(m.startup.desc(), &scope).ok());
  CompiledProgram compiled(m.main.desc());
  compiled.WithDataParallel(m.loss.name(), build, exec, nullptr, CpuPlaces(static_cast<int>(places)));
  Run10 out;
  for (int step = 0; step < runs; ++step) {
    auto r = compiled.Run(&scope, Mlp::Batch(step), {m.loss.name()});
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return out;
    float mean = 0;
    for (float v : TensorToVector<float>((*r)[0])) mean += v / static_cast<float>(places);
    out.losses.push_back(mean);
  }
  out.w =
      TensorToVector<float>(compiled.parallel_executor()->place_scope(places - 1)->FindVar("fc_0.w_0")->Get<Tensor>());
  return out;
}

TEST(FuseElewiseAddActTest, RewritesForwardAndBackwardPairsAsFluidDoes) {
  Mlp m;
  ProgramDesc p = m.main.desc();
  FuseCounts n = FuseElewiseAddAct(p.MutableBlock(0));
  EXPECT_EQ(n.forward, 1);  // fc_0's add+relu (fc_1's softmax is not fusable)
  EXPECT_EQ(n.backward, 1);
  const OpDesc* fwd = nullptr;
  const OpDesc* bwd = nullptr;
  for (size_t i = 0; i < p.Block(0).OpSize(); ++i) {
    const OpDesc& op = p.Block(0).Op(i);
    EXPECT_NE(op.type, "relu");
    EXPECT_NE(op.type, "relu_grad");
    if (op.type == "fused_elemwise_activation") fwd = &op;
    if (op.type == "fused_elemwise_activation_grad") bwd = &op;
  }
  ASSERT_NE(fwd, nullptr);
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ(fwd->GetAttr<std::vector<std::string>>("functor_list"),
            (std::vector<std::string>{"relu", "elementwise_add"}));
  EXPECT_TRUE(fwd->GetAttr<bool>("save_intermediate_out"));
  EXPECT_EQ(fwd->Input("Y"), (std::vector<std::string>{"fc_0.b_0"}));
  EXPECT_EQ(bwd->GetAttr<std::vector<std::string>>("functor_list"),
            (std::vector<std::string>{"relu_grad", "elementwise_add_grad"}));
  EXPECT_EQ(bwd->Output("Y@GRAD"), (std::vector<std::string>{"fc_0.b_0@GRAD"}));
  // The bias gradient stays announced, so it is still all-reduced.
  EXPECT_EQ(bwd->GetAttr<std::vector<std::string>>(kOpRoleVarAttr),
            (std::vector<std::string>{"fc_0.b_0", "fc_0.b_0@GRAD"}));
}

class FusionTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FusionTest, FusionOnAndOffAgreeWithin1e6) {
  BuildStrategy off, on;
  on.fuse_elewise_add_act_ops = true;
  Run10 a = Train(GetParam(), 2, off), b = Train(GetParam(), 2, on);
  ASSERT_EQ(a.losses.size(), 10u);
  ASSERT_EQ(b.losses.size(), 10u);
  for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(a.losses[i], b.losses[i], 1e-6) << "step " << i;
  EXPECT_LT(a.losses[9], a.losses[0]);
  ASSERT_EQ(a.w.size(), b.w.size());
  for (size_t i = 0; i < a.w.size(); ++i) EXPECT_NEAR(a.w[i], b.w[i], 1e-6) << i;
}

INSTANTIATE_TEST_SUITE_P(Acts, FusionTest, ::testing::Values("relu", "sigmoid", "tanh"));

TEST(CompiledProgramTest, NumIterationPerRunRunsThatManySteps) {
  ExecutionStrategy three;
  three.num_iteration_per_run = 3;
  // The batch depends on the step index; use one fixed batch on both sides.
  Mlp m;
  Executor exe;
  Scope s1, s3;
  ASSERT_TRUE(exe.Run(m.startup.desc(), &s1).ok());
  ASSERT_TRUE(exe.Run(m.startup.desc(), &s3).ok());
  CompiledProgram one(m.main.desc()), per3(m.main.desc());
  one.WithDataParallel(m.loss.name(), {}, {}, nullptr, CpuPlaces(2));
  per3.WithDataParallel(m.loss.name(), {}, three, nullptr, CpuPlaces(2));
  std::vector<Tensor> last;
  for (int i = 0; i < 3; ++i) {
    auto r = one.Run(&s1, Mlp::Batch(0), {m.loss.name()});
    ASSERT_TRUE(r.ok()) << r.status();
    last = *r;
  }
  auto r3 = per3.Run(&s3, Mlp::Batch(0), {m.loss.name()});
  ASSERT_TRUE(r3.ok()) << r3.status();
  EXPECT_EQ(TensorToVector<float>((*r3)[0]), TensorToVector<float>(last[0]));  // the third step's loss
  EXPECT_EQ(TensorToVector<float>(s1.FindVar("fc_0.w_0")->Get<Tensor>()),
            TensorToVector<float>(s3.FindVar("fc_0.w_0")->Get<Tensor>()));
  ExecutionStrategy zero;
  zero.num_iteration_per_run = 0;
  CompiledProgram bad(m.main.desc());
  bad.WithDataParallel(m.loss.name(), {}, zero, nullptr, CpuPlaces(2));
  EXPECT_NE(bad.Run(&s1, Mlp::Batch(0), {m.loss.name()}).status().message().find("num_iteration_per_run (0)"),
            std::string::npos);
}

TEST(CompiledProgramTest, TestProgramSharesTheTrainProgramsParameters) {
  Mlp m;
  Program test = m.main.clone(/*for_test=*/true);
  Executor exe;
  Scope scope;
  ASSERT_TRUE(exe.Run(m.startup.desc(), &scope).ok());
  CompiledProgram train(m.main.desc()), eval(test.desc());
  train.WithDataParallel(m.loss.name(), {}, {}, nullptr, CpuPlaces(2));
  eval.WithDataParallel(m.loss.name(), {}, {}, &train, CpuPlaces(2));
  EXPECT_NE(eval.Run(&scope, Mlp::Batch(0), {m.loss.name()}).status().message().find("has not run yet"),
            std::string::npos);
  for (int step = 0; step < 3; ++step) ASSERT_TRUE(train.Run(&scope, Mlp::Batch(step), {m.loss.name()}).ok());
  auto before = eval.Run(&scope, Mlp::Batch(7), {m.loss.name()});
  ASSERT_TRUE(before.ok()) << before.status();
  // The same evaluation on one place through a plain Executor in the scope
  // the train program updates.
  auto reference = exe.Run(test.desc(), &scope, Mlp::Batch(7), {m.loss.name()});
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::vector<float> per_place = TensorToVector<float>((*before)[0]);
  ASSERT_EQ(per_place.size(), 2u);
  EXPECT_NEAR((per_place[0] + per_place[1]) / 2, TensorToVector<float>((*reference)[0])[0], 1e-6);
  // Further training is seen by the test program: it shares, not copies.
  for (int step = 3; step < 6; ++step) ASSERT_TRUE(train.Run(&scope, Mlp::Batch(step), {m.loss.name()}).ok());
  auto after = eval.Run(&scope, Mlp::Batch(7), {m.loss.name()});
  ASSERT_TRUE(after.ok());
  EXPECT_NE(TensorToVector<float>((*after)[0]), per_place);
  // Place 1 of the test program reads place 1 of the train program.
  EXPECT_EQ(eval.parallel_executor()->place_scope(1), train.parallel_executor()->place_scope(1));
}

TEST(CompiledProgramTest, WithoutDataParallelItIsThePlainExecutor) {
  Mlp m;
  Executor exe;
  Scope a, b;
  ASSERT_TRUE(exe.Run(m.startup.desc(), &a).ok());
  ASSERT_TRUE(exe.Run(m.startup.desc(), &b).ok());
  CompiledProgram plain(m.main.desc());
  auto r1 = plain.Run(&a, Mlp::Batch(0), {m.loss.name()});
  auto r2 = exe.Run(m.main.desc(), &b, Mlp::Batch(0), {m.loss.name()});
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_FALSE(plain.data_parallel());
  EXPECT_EQ(TensorToVector<float>((*r1)[0]), TensorToVector<float>((*r2)[0]));
}

TEST(CompiledProgramTest, DebugGraphvizPathWritesAGraphDotAccepts) {
  const std::string path = ::testing::TempDir() + "/oar_ssa_graph.dot";
  std::remove(path.c_str());
  BuildStrategy build;
  build.debug_graphviz_path = path;
  build.fuse_elewise_add_act_ops = true;
  Run10 r = Train("relu", 2, build, {}, 1);
  ASSERT_EQ(r.losses.size(), 1u);
  std::ifstream in(path);
  std::string dot((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(dot.find("fused_elemwise_activation"), std::string::npos);
  EXPECT_NE(dot.find("all_reduce(fc_0.w_0@GRAD) part 2/2"), std::string::npos);
  // Graphviz itself must accept it (scripts/install-deps.sh installs graphviz).
  const std::string cmd = "dot -Tsvg '" + path + "' -o /dev/null 2>&1";
  ASSERT_EQ(std::system("command -v dot >/dev/null"), 0) << "graphviz's dot is missing: run scripts/install-deps.sh";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace oar

namespace oar {
namespace {

// Under Reduce each place updates only the optimizer state of the
// parameters it owns; GatherToPlace0 brings it to the caller's scope, which
// is what checkpoints save.
TEST(ParallelExecutorGatherTest, PlaceZeroHoldsCurrentOptimizerStateAfterGather) {
  std::map<std::string, std::vector<float>> state[2];
  for (int reduce = 0; reduce < 2; ++reduce) {
    Mlp m;
    Executor exe;
    Scope scope;
    ASSERT_TRUE(exe.Run(m.startup.desc(), &scope).ok());
    BuildStrategy build;
    if (reduce) build.reduce_strategy = BuildStrategy::ReduceStrategy::kReduce;
    auto pe = ParallelExecutor::Create(CpuPlaces(2), m.loss.name(), m.main.desc(), &scope, build);
    ASSERT_TRUE(pe.ok());
    for (int step = 0; step < 3; ++step) ASSERT_TRUE((*pe)->Run({m.loss.name()}, Mlp::Batch(step)).ok());
    ASSERT_TRUE((*pe)->GatherToPlace0().ok());
    for (const auto& [name, v] : m.main.desc().Block(0).vars()) {
      if (v.persistable && name.find("velocity") != std::string::npos) {
        state[reduce][name] = TensorToVector<float>(scope.FindVar(name)->Get<Tensor>());
      }
    }
  }
  ASSERT_EQ(state[0].size(), 4u);  // two weights, two biases
  for (const auto& [name, all_reduce] : state[0]) {
    const auto& reduced = state[1][name];
    ASSERT_EQ(all_reduce.size(), reduced.size()) << name;
    for (size_t i = 0; i < reduced.size(); ++i) EXPECT_NEAR(all_reduce[i], reduced[i], 1e-5) << name << " " << i;
  }
}

}  // namespace
}  // namespace oar
