// The DistributeTranspiler's programs, op for op, for the network of Fluid's
// test_dist_transpiler.py (fc_w 1000×1000 is cut in two 500-row blocks, fc_b
// is not; RoundRobin puts fc_b and fc_w.block1 on the first pserver).
#include "transpiler/distribute_transpiler.h"

#include "gtest/gtest.h"
#include "tests/transpiler/fc_net.h"

namespace oar {
namespace {

using Ops = std::vector<std::string>;

const Ops& kForwardBackward = FcNetForwardBackward();

// A filler's "shape", whichever integer width the op keeps it in.
std::vector<int64_t> ShapeAttr(const OpDesc& op) {
  auto wide = op.GetAttr<std::vector<int64_t>>("shape");
  if (!wide.empty()) return wide;
  auto narrow = op.GetAttr<std::vector<int32_t>>("shape");
  return {narrow.begin(), narrow.end()};
}

Ops Concat(Ops a, const Ops& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(DistributeTranspilerTest, SyncTrainerProgramIsFluidsLayout) {
  auto set = TranspileNet({});
  ASSERT_TRUE(set.ok()) << set.status();
  const BlockDesc& t = set->trainer.Block(0);
  EXPECT_EQ(OpTypes(t), Concat(kForwardBackward, {"send", "mul_grad", "split_byref", "send", "send_barrier", "recv",
                                                  "recv", "fetch_barrier", "concat"}));
  // fc_b is not sliced, so its gradient carries the trainer suffix; fc_w's
  // blocks do.
  EXPECT_EQ(t.Op(10).Input("X"), (Ops{"fc_b@GRAD.trainer_0"}));
  EXPECT_EQ(t.Op(9).Output("Y@GRAD"), (Ops{"fc_b@GRAD.trainer_0"}));
  EXPECT_EQ(t.Op(9).GetAttr<Ops>(kOpRoleVarAttr), (Ops{"fc_b", "fc_b@GRAD.trainer_0"}));
  EXPECT_EQ(t.Op(12).Output("Out"), (Ops{"fc_w@GRAD.block0.trainer_0", "fc_w@GRAD.block1.trainer_0"}));
  EXPECT_EQ(t.Op(12).GetAttr<std::vector<int32_t>>("sections"), (std::vector<int32_t>{500, 500}));
  EXPECT_EQ(t.Op(12).role(), static_cast<int32_t>(OpRole::kDist));
  EXPECT_EQ(t.Op(13).GetAttr<Ops>("epmap"), (Ops{"127.0.0.1:6175", "127.0.0.1:6174"}));
  EXPECT_EQ(t.Op(13).role(), static_cast<int32_t>(OpRole::kRPC));
  EXPECT_EQ(t.Op(14).Input("X"), (Ops{t.Op(10).Output("Out")[0], t.Op(13).Output("Out")[0]}));
  EXPECT_EQ(t.Op(16).Output("Out"), (Ops{"fc_w.block0", "fc_w.block1"}));
  EXPECT_EQ(t.Op(17).Output("Out"), (Ops{"fc_b", "fc_w.block0", "fc_w.block1"}));
  EXPECT_EQ(t.Op(18).Output("Out"), (Ops{"fc_w"}));
  ASSERT_NE(t.FindVar("fc_w.block1"), nullptr);
  EXPECT_EQ(t.FindVar("fc_w.block1")->shape, (std::vector<int64_t>{500, 1000}));
  EXPECT_EQ(t.FindVar("fc_b@GRAD"), nullptr);        // renamed
  EXPECT_EQ(t.FindVar("learning_rate_0"), nullptr);  // only the optimizer read it
  for (size_t i = 0; i < t.OpSize(); ++i) EXPECT_NE(t.Op(i).type, "sgd");
  // The startup pulls every parameter from the pservers.
  const BlockDesc& st = set->trainer_startup.Block(0);
  EXPECT_EQ(OpTypes(st), (Ops{"uniform_random", "fill_constant", "recv", "recv", "fetch_barrier", "concat"}));
  EXPECT_TRUE(st.HasVar("fc_w.block0") && st.HasVar("fc_w.block1") && st.HasVar("fc_w") && st.HasVar("fc_b"));
  EXPECT_FALSE(st.HasVar("fc_w@GRAD"));
  EXPECT_FALSE(st.HasVar("learning_rate_0"));
}

TEST(DistributeTranspilerTest, SyncPserverProgramsAreFluidsLayout) {
  auto set = TranspileNet({});
  ASSERT_TRUE(set.ok()) << set.status();
  const ProgramDesc& ps = set->pserver[0];
  ASSERT_EQ(ps.NumBlocks(), 3u);
  EXPECT_EQ(OpTypes(ps.Block(0)), (Ops{"listen_and_serv"}));
  EXPECT_EQ(OpTypes(ps.Block(1)), (Ops{"sum", "scale", "sgd"}));
  EXPECT_EQ(OpTypes(ps.Block(2)), (Ops{"sum", "scale", "sgd"}));
  const OpDesc& ls = ps.Block(0).Op(0);
  EXPECT_EQ(ls.GetAttr<BlockRefs>("optimize_blocks").idx, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(ls.GetAttr<Ops>("grad_to_block_id"), (Ops{"fc_b@GRAD:1", "fc_w@GRAD.block1:2"}));
  EXPECT_EQ(ls.GetAttr<int32_t>("Fanin"), 2);
  EXPECT_EQ(ls.GetAttr<int32_t>("distributed_mode"), 0);
  EXPECT_EQ(ls.GetAttr<std::string>("endpoint"), "127.0.0.1:6174");
  EXPECT_EQ(ls.Input("X"), (Ops{"fc_b@GRAD.trainer_0", "fc_b@GRAD.trainer_1", "fc_w@GRAD.block1.trainer_0",
                                "fc_w@GRAD.block1.trainer_1"}));
  const OpDesc& sgd = ps.Block(2).Op(2);
  EXPECT_EQ(sgd.Input("Param"), (Ops{"fc_w.block1"}));
  EXPECT_EQ(sgd.Input("Grad"), (Ops{"fc_w@GRAD.block1"}));
  EXPECT_EQ(sgd.Output("ParamOut"), (Ops{"fc_w.block1"}));
  EXPECT_FLOAT_EQ(ps.Block(2).Op(1).GetAttr<float>("scale"), 0.5f);
  EXPECT_TRUE(ps.Block(0).FindVar("fc_w@GRAD.block1")->persistable);
  EXPECT_FALSE(ps.Block(0).FindVar("fc_w@GRAD.block1.trainer_1")->persistable);
  // Its startup initializes only what it holds, with the block's shape.
  const BlockDesc& st = set->pserver_startup[0].Block(0);
  EXPECT_EQ(OpTypes(st), (Ops{"uniform_random", "fill_constant", "fill_constant"}));
  EXPECT_EQ(st.Op(0).Output("Out"), (Ops{"fc_w.block1"}));
  EXPECT_EQ(ShapeAttr(st.Op(0)), (std::vector<int64_t>{500, 1000}));
  EXPECT_EQ(st.FindVar("fc_w.block1")->shape, (std::vector<int64_t>{500, 1000}));
  // The second pserver owns fc_w.block0 only.
  EXPECT_EQ(set->pserver[1].NumBlocks(), 2u);
  EXPECT_EQ(OpTypes(set->pserver[1].Block(1)), (Ops{"sum", "scale", "sgd"}));
  EXPECT_EQ(set->pserver[1].Block(1).Op(2).Input("Param"), (Ops{"fc_w.block0"}));
  EXPECT_EQ(OpTypes(set->pserver_startup[1].Block(0)), (Ops{"uniform_random", "fill_constant"}));
}

TEST(DistributeTranspilerTest, AsyncHasNoBarriersMergesOrRenames) {
  auto set = TranspileNet({}, {}, 1, 2, /*sync=*/false);
  ASSERT_TRUE(set.ok()) << set.status();
  const BlockDesc& t = set->trainer.Block(0);
  EXPECT_EQ(OpTypes(t),
            Concat(kForwardBackward, {"send", "mul_grad", "split_byref", "send", "recv", "recv", "concat"}));
  EXPECT_EQ(t.Op(10).Input("X"), (Ops{"fc_b@GRAD"}));
  EXPECT_EQ(t.Op(12).Output("Out"), (Ops{"fc_w@GRAD.block0", "fc_w@GRAD.block1"}));
  // Each recv waits on its own parameter's send.
  EXPECT_EQ(t.Op(14).Input("X"), t.Op(10).Output("Out"));
  EXPECT_EQ(t.Op(14).GetAttr<int32_t>("trainer_id"), 1);
  const ProgramDesc& ps = set->pserver[0];
  EXPECT_EQ(OpTypes(ps.Block(1)), (Ops{"sgd"}));
  const OpDesc& ls = ps.Block(0).Op(0);
  EXPECT_EQ(ls.GetAttr<int32_t>("distributed_mode"), 1);
  EXPECT_FALSE(ls.GetAttr<bool>("sync_mode", true));
  EXPECT_EQ(ls.Input("X"), (Ops{"fc_b@GRAD", "fc_w@GRAD.block1"}));
  EXPECT_FALSE(ps.Block(0).HasVar("fc_b@GRAD.trainer_0"));
  // The startup still pulls, with a fetch barrier, as Fluid's does.
  EXPECT_EQ(OpTypes(set->trainer_startup.Block(0)),
            (Ops{"uniform_random", "fill_constant", "recv", "recv", "fetch_barrier", "concat"}));
}

TEST(DistributeTranspilerTest, LargeMinBlockSizeAndNoSliceKeepVariablesWhole) {
  for (bool no_slice : {false, true}) {
    DistributeTranspilerConfig c;
    if (no_slice) {
      c.slice_var_up = false;
    } else {
      c.min_block_size = 1048576;
    }
    auto set = TranspileNet({}, c);
    ASSERT_TRUE(set.ok()) << set.status();
    EXPECT_EQ(OpTypes(set->trainer.Block(0)),
              Concat(kForwardBackward, {"send", "mul_grad", "send", "send_barrier", "recv", "recv", "fetch_barrier"}));
    EXPECT_EQ(set->trainer.Block(0).Op(12).Input("X"), (Ops{"fc_w@GRAD.trainer_0"}));
    // fc_b on the first pserver, fc_w on the second.
    EXPECT_EQ(set->pserver[0].Block(1).Op(2).Input("Param"), (Ops{"fc_b"}));
    EXPECT_EQ(set->pserver[1].Block(1).Op(2).Input("Param"), (Ops{"fc_w"}));
    EXPECT_EQ(ShapeAttr(set->pserver_startup[1].Block(0).Op(0)), (std::vector<int64_t>{1000, 1000}));
  }
}

TEST(DistributeTranspilerTest, ExponentialDecayGoesToTheLrBlock) {
  auto set = TranspileNet({.lr = "exponential"});
  ASSERT_TRUE(set.ok()) << set.status();
  const ProgramDesc& ps = set->pserver[0];
  ASSERT_EQ(ps.NumBlocks(), 4u);
  // The program's own LR ops, moved as they are (our layers emit scale for
  // a scalar / and *, as Fluid >= 1.5's math_op_patch does).
  EXPECT_EQ(OpTypes(ps.Block(1)),
            (Ops{"increment", "cast", "scale", "floor", "fill_constant", "elementwise_pow", "scale"}));
  EXPECT_EQ(ps.Block(1).parent_idx(), 0);
  // The optimize blocks are children of the LR block: listen_and_serv runs
  // it first, then them in parallel.
  EXPECT_EQ(ps.Block(2).parent_idx(), 1);
  EXPECT_EQ(OpTypes(ps.Block(2)), (Ops{"sum", "scale", "sgd"}));
  const OpDesc& ls = ps.Block(0).Op(0);
  EXPECT_EQ(ls.GetAttr<int32_t>("lr_decay_block_id"), 1);
  EXPECT_EQ(ls.GetAttr<BlockRefs>("optimize_blocks").idx, (std::vector<int32_t>{1, 2, 3}));
  // The trainer computes no learning rate any more.
  for (size_t i = 0; i < set->trainer.Block(0).OpSize(); ++i) {
    EXPECT_EQ(set->trainer.Block(0).Op(i).role() & static_cast<int32_t>(OpRole::kLRSched), 0);
  }
  // The pserver startup initializes the step counter.
  bool counter = false;
  for (size_t i = 0; i < set->pserver_startup[0].Block(0).OpSize(); ++i) {
    for (const auto& n : set->pserver_startup[0].Block(0).Op(i).OutputArgNames()) counter |= n == "@LR_DECAY_COUNTER@";
  }
  EXPECT_TRUE(counter);
}

TEST(DistributeTranspilerTest, PiecewiseDecayCopiesItsConditionalBlocks) {
  auto set = TranspileNet({.lr = "piecewise"});
  ASSERT_TRUE(set.ok()) << set.status();
  const ProgramDesc& ps = set->pserver[0];
  const BlockDesc& lr = ps.Block(1);
  std::vector<int32_t> subs;
  for (size_t i = 0; i < lr.OpSize(); ++i) {
    if (lr.Op(i).type == "conditional_block") subs.push_back(lr.Op(i).GetAttr<BlockRef>("sub_block").idx);
  }
  ASSERT_EQ(subs, (std::vector<int32_t>{2, 3, 4}));  // one per piece, right after the LR block
  for (int32_t b : subs) {
    EXPECT_EQ(ps.Block(static_cast<size_t>(b)).parent_idx(), 1);
    EXPECT_GT(ps.Block(static_cast<size_t>(b)).OpSize(), 0u);
  }
  ASSERT_EQ(ps.NumBlocks(), 7u);
  EXPECT_EQ(ps.Block(5).parent_idx(), 4);  // Fluid: the block created last before them
  EXPECT_EQ(OpTypes(ps.Block(5)), (Ops{"sum", "scale", "sgd"}));
  EXPECT_EQ(ps.Block(0).Op(0).GetAttr<BlockRefs>("optimize_blocks").idx, (std::vector<int32_t>{1, 5, 6}));
}

TEST(DistributeTranspilerTest, L2DecayAndClipRunOnThePserverBeforeTheOptimizer) {
  auto set = TranspileNet({.l2_and_clip = true});
  ASSERT_TRUE(set.ok()) << set.status();
  // The clip op comes first in the program, so fc_w is the first pair found
  // and its block 0 lands on the first pserver with fc_b.
  const ProgramDesc& ps = set->pserver[0];
  EXPECT_EQ(OpTypes(ps.Block(1)), (Ops{"sum", "scale", "sgd"}));  // fc_b
  const BlockDesc& w = ps.Block(2);                               // fc_w.block0
  EXPECT_EQ(OpTypes(w), (Ops{"sum", "scale", "clip", "scale", "sum", "sgd"}));
  EXPECT_EQ(w.Op(2).Input("X"), (Ops{"fc_w@GRAD.block0"}));  // clips the merged block
  EXPECT_EQ(w.Op(3).Input("X"), (Ops{"fc_w.block0"}));       // decays the block
  // The optimizer reads the clipped and decayed gradient.
  EXPECT_EQ(w.Op(5).Input("Grad"), w.Op(4).Output("Out"));
  EXPECT_EQ(w.Op(5).Input("Grad"), w.Op(2).Output("Out"));
  // None of it is left on the trainer.
  for (const auto& type : OpTypes(set->trainer.Block(0))) EXPECT_NE(type, "clip");
}

TEST(DistributeTranspilerTest, AdamAccumulatorsTakeTheBlockShape) {
  auto set = TranspileNet({.optimizer = "adam"});
  ASSERT_TRUE(set.ok()) << set.status();
  const ProgramDesc& ps = set->pserver[0];
  EXPECT_EQ(OpTypes(ps.Block(2)), (Ops{"sum", "scale", "adam", "scale", "scale"}));
  const OpDesc& adam = ps.Block(2).Op(2);
  const BlockDesc& g = ps.Block(0);
  EXPECT_EQ(g.FindVar(adam.Input("Moment1")[0])->shape, (std::vector<int64_t>{500, 1000}));
  EXPECT_EQ(g.FindVar(adam.Input("Moment2")[0])->shape, (std::vector<int64_t>{500, 1000}));
  EXPECT_EQ(g.FindVar(adam.Input("Beta1Pow")[0])->shape, (std::vector<int64_t>{1}));
  EXPECT_EQ(adam.Output("Moment1Out"), adam.Input("Moment1"));
  // The pserver startup fills the moments with the block's shape.
  const BlockDesc& st = set->pserver_startup[0].Block(0);
  bool filled = false;
  for (size_t i = 0; i < st.OpSize(); ++i) {
    if (st.Op(i).Output("Out") == adam.Input("Moment1")) {
      filled = true;
      EXPECT_EQ(ShapeAttr(st.Op(i)), (std::vector<int64_t>{500, 1000}));
    }
  }
  EXPECT_TRUE(filled);
  // …and the trainer's startup no longer does.
  for (size_t i = 0; i < set->trainer_startup.Block(0).OpSize(); ++i) {
    EXPECT_NE(set->trainer_startup.Block(0).Op(i).Output("Out"), adam.Input("Moment1"));
  }
}

TEST(DistributeTranspilerTest, RmspropAccumulatorsTakeTheBlockShape) {
  auto set = TranspileNet({.optimizer = "rmsprop"});
  ASSERT_TRUE(set.ok()) << set.status();
  const BlockDesc& b = set->pserver[0].Block(2);
  EXPECT_EQ(OpTypes(b), (Ops{"sum", "scale", "rmsprop"}));
  for (const char* slot : {"Moment", "MeanSquare"}) {
    EXPECT_EQ(set->pserver[0].Block(0).FindVar(b.Op(2).Input(slot)[0])->shape, (std::vector<int64_t>{500, 1000}))
        << slot;
  }
}

TEST(DistributeTranspilerTest, OneTrainerSendsUnsuffixedGradientsAndMergesNothing) {
  auto set = TranspileNet({}, {}, 0, 1);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->trainer.Block(0).Op(10).Input("X"), (Ops{"fc_b@GRAD"}));
  EXPECT_EQ(OpTypes(set->pserver[0].Block(1)), (Ops{"sgd"}));
}

TEST(DistributeTranspilerTest, PserverThatOwnsNothingGetsAnEmptyBlock) {
  DistributeTranspilerConfig c;
  c.slice_var_up = false;
  auto set = TranspileNet({}, c, 0, 2, true, "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3");
  ASSERT_TRUE(set.ok()) << set.status();
  const ProgramDesc& ps = set->pserver[2];
  ASSERT_EQ(ps.NumBlocks(), 2u);
  EXPECT_EQ(ps.Block(1).OpSize(), 0u);
  EXPECT_EQ(ps.Block(0).Op(0).GetAttr<BlockRefs>("optimize_blocks").idx, (std::vector<int32_t>{1}));
  EXPECT_TRUE(ps.Block(0).Op(0).Input("X").empty());
}

TEST(DistributeTranspilerTest, HashNameKeepsGradAndParamBlocksTogether) {
  DistributeTranspilerConfig c;
  c.split_method = DistributeTranspilerConfig::SplitMethod::kHashName;
  auto set = TranspileNet({}, c);
  ASSERT_TRUE(set.ok()) << set.status();
  const BlockDesc& t = set->trainer.Block(0);
  EXPECT_EQ(OnlyOp(t, "split_byref").Output("Out").size(), 2u);
  std::vector<std::string> send_eps, recv_eps;
  for (size_t i = 0; i < t.OpSize(); ++i) {
    const auto eps = t.Op(i).GetAttr<Ops>("epmap");
    if (t.Op(i).type == "send") send_eps.insert(send_eps.end(), eps.begin(), eps.end());
    if (t.Op(i).type == "recv") recv_eps.insert(recv_eps.end(), eps.begin(), eps.end());
  }
  EXPECT_EQ(send_eps, recv_eps);
  // Each pserver optimizes exactly the blocks it is sent.
  size_t blocks = 0;
  for (const auto& ps : set->pserver) blocks += ps.Block(0).Op(0).GetAttr<Ops>("grad_to_block_id").size();
  EXPECT_EQ(blocks, 3u);
}

TEST(DistributeTranspilerTest, RuntimeSplitSendsWholeVariablesWithSections) {
  DistributeTranspilerConfig c;
  c.runtime_split_send_recv = true;
  auto set = TranspileNet({}, c);
  ASSERT_TRUE(set.ok()) << set.status();
  const BlockDesc& t = set->trainer.Block(0);
  EXPECT_EQ(OpTypes(t),
            Concat(kForwardBackward, {"send", "mul_grad", "send", "send_barrier", "recv", "recv", "fetch_barrier"}));
  const OpDesc& send = t.Op(12);
  EXPECT_EQ(send.Input("X"), (Ops{"fc_w@GRAD"}));
  EXPECT_EQ(send.GetAttr<std::vector<int32_t>>("sections"), (std::vector<int32_t>{500, 500}));
  EXPECT_EQ(send.GetAttr<Ops>("send_varnames"), (Ops{"fc_w@GRAD.block0.trainer_0", "fc_w@GRAD.block1.trainer_0"}));
  const OpDesc& recv = t.Op(15);
  EXPECT_EQ(recv.Output("Out"), (Ops{"fc_w"}));
  EXPECT_EQ(recv.GetAttr<Ops>("recv_varnames"), (Ops{"fc_w.block0", "fc_w.block1"}));
}

TEST(DistributeTranspilerTest, Nccl2AddsGenNcclIdToStartupOnly) {
  FcNet net;
  const std::string before = net.main.desc().Serialize();
  DistributeTranspilerConfig c;
  c.mode = "nccl2";
  c.wait_port = false;
  DistributeTranspiler t(c);
  ASSERT_TRUE(t.transpile(1, &net.main.desc(), "", std::string("10.0.0.1:6170,10.0.0.2:6170,10.0.0.3:6170"), true,
                          &net.startup.desc(), "10.0.0.2:6170")
                  .ok());
  EXPECT_EQ(net.main.desc().Serialize(), before);
  const BlockDesc& st = net.startup.desc().Block(0);
  const OpDesc& gen = st.Op(st.OpSize() - 1);
  EXPECT_EQ(gen.type, "gen_nccl_id");
  EXPECT_EQ(gen.Output("NCCLID"), (Ops{"NCCLID"}));
  EXPECT_EQ(gen.GetAttr<std::string>("endpoint"), "10.0.0.2:6170");
  EXPECT_EQ(gen.GetAttr<Ops>("endpoint_list"), (Ops{"10.0.0.1:6170", "10.0.0.3:6170"}));
  EXPECT_EQ(gen.GetAttr<int32_t>("trainer_id"), 1);
  ASSERT_NE(st.FindVar("NCCLID"), nullptr);
  EXPECT_TRUE(st.FindVar("NCCLID")->persistable);
  EXPECT_EQ(st.FindVar("NCCLID")->type, paddle::framework::proto::VarType::RAW);
  EXPECT_EQ(t.trainer_endpoints().size(), 3u);
  EXPECT_FALSE(t.get_pserver_program("10.0.0.1:6170").ok());
}

TEST(DistributeTranspilerTest, SameInputsGiveTheSameBytes) {
  for (const char* opt : {"sgd", "adam"}) {
    auto a = TranspileNet({.optimizer = opt, .lr = "piecewise", .l2_and_clip = true});
    auto b = TranspileNet({.optimizer = opt, .lr = "piecewise", .l2_and_clip = true});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->trainer.Serialize(), b->trainer.Serialize());
    EXPECT_EQ(a->trainer_startup.Serialize(), b->trainer_startup.Serialize());
    for (size_t i = 0; i < a->pserver.size(); ++i) {
      EXPECT_EQ(a->pserver[i].Serialize(), b->pserver[i].Serialize());
      EXPECT_EQ(a->pserver_startup[i].Serialize(), b->pserver_startup[i].Serialize());
    }
  }
}

}  // namespace
}  // namespace oar
