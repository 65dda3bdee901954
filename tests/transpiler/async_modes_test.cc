// The transpiler's programs for Fluid 1.5–1.8's async modes, op for op as
// Paddle 1.8.5's DistributeTranspiler and GeoSgdTranspiler write them for
// the network of test_dist_transpiler.py (fc_w 1000×1000 in two 500-row
// blocks, fc_b whole):
//  - async with runtime_split_send_recv (the communicator's program): a send
//    of the whole gradient after the op that computes it (send_varnames and
//    sections name its blocks), a recv per parameter stacking its blocks, no
//    split, concat or barrier;
//  - half_async: the same and a send_barrier(half_async) before the recvs;
//  - geo_sgd_mode: the optimizer stays, `.delta` variables, one send at the
//    end; pservers add deltas with sum (distributed_mode 3).
#include "gtest/gtest.h"
#include "tests/transpiler/fc_net.h"

namespace oar {
namespace {

using Ops = std::vector<std::string>;

Ops With(Ops a, const Ops& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(AsyncModesTest, TheCommunicatorsProgramSendsWholeGradientsAndStacksParameters) {
  auto set = TranspileNet({}, DistributeTranspilerConfig::AsyncStrategy(), 1, 2, /*sync=*/false);
  ASSERT_TRUE(set.ok()) << set.status();
  const BlockDesc& t = set->trainer.Block(0);
  EXPECT_EQ(OpTypes(t), With(FcNetForwardBackward(), {"send", "mul_grad", "send", "recv", "recv"}));
  const OpDesc& send_w = t.Op(12);
  EXPECT_EQ(send_w.Input("X"), (Ops{"fc_w@GRAD"}));
  EXPECT_EQ(send_w.GetAttr<Ops>("send_varnames"), (Ops{"fc_w@GRAD.block0", "fc_w@GRAD.block1"}));
  EXPECT_EQ(send_w.GetAttr<std::vector<int32_t>>("sections"), (std::vector<int32_t>{500, 500}));
  EXPECT_EQ(send_w.GetAttr<int32_t>("trainer_id"), 1);
  EXPECT_EQ(t.Op(10).GetAttr<Ops>("send_varnames"), (Ops{"fc_b@GRAD"}));
  const OpDesc& recv_w = t.Op(14);
  EXPECT_EQ(recv_w.Output("Out"), (Ops{"fc_w"}));
  EXPECT_EQ(recv_w.GetAttr<Ops>("recv_varnames"), (Ops{"fc_w.block0", "fc_w.block1"}));
  EXPECT_EQ(recv_w.Input("X"), send_w.Output("Out"));  // each recv waits on its parameter's send
  const OpDesc& ls = set->pserver[0].Block(0).Op(0);
  EXPECT_EQ(ls.GetAttr<int32_t>("distributed_mode"), 1);
  EXPECT_EQ(ls.Input("X"), (Ops{"fc_b@GRAD", "fc_w@GRAD.block1"}));  // no .trainer_N names
  EXPECT_EQ(OpTypes(set->pserver[0].Block(1)), (Ops{"sgd"}));
}

TEST(AsyncModesTest, HalfAsyncAddsTheThreadsBarrierBeforeTheRecvs) {
  auto set = TranspileNet({}, DistributeTranspilerConfig::HalfAsyncStrategy(), 0, 2, /*sync=*/false);
  ASSERT_TRUE(set.ok()) << set.status();
  const BlockDesc& t = set->trainer.Block(0);
  EXPECT_EQ(OpTypes(t), With(FcNetForwardBackward(), {"send", "mul_grad", "send", "send_barrier", "recv", "recv"}));
  const OpDesc& barrier = t.Op(13);
  EXPECT_TRUE(barrier.GetAttr<bool>("half_async"));
  EXPECT_EQ(barrier.Input("X"), (Ops{t.Op(10).Output("Out")[0], t.Op(12).Output("Out")[0]}));
  EXPECT_EQ(set->pserver[0].Block(0).Op(0).GetAttr<int32_t>("distributed_mode"), 1);  // as Fluid 1.8's
}

TEST(AsyncModesTest, GeoSgdKeepsTheOptimizerAndThePserversAddDeltas) {
  auto set = TranspileNet({}, DistributeTranspilerConfig::GeoStrategy(), 0, 2, /*sync=*/false);
  ASSERT_TRUE(set.ok()) << set.status();
  const BlockDesc& t = set->trainer.Block(0);
  EXPECT_EQ(OpTypes(t), With(FcNetForwardBackward(), {"mul_grad", "sgd", "sgd", "send"}));
  EXPECT_TRUE(t.Op(t.OpSize() - 1).Input("X").empty());  // no sparse table: a step, with no ids
  for (const char* v : {"fc_w.delta", "fc_w.block0.delta", "fc_w.block1.delta", "fc_b.delta"}) {
    EXPECT_TRUE(t.HasVar(v)) << v;
  }
  // The learning rate's initializer stays with the optimizer.
  EXPECT_EQ(OpTypes(set->trainer_startup.Block(0)), (Ops{"uniform_random", "fill_constant", "fill_constant", "recv",
                                                         "recv", "fetch_barrier", "concat", "send"}));
  const ProgramDesc& ps = set->pserver[0];
  const OpDesc& ls = ps.Block(0).Op(0);
  EXPECT_EQ(ls.GetAttr<int32_t>("distributed_mode"), 3);
  EXPECT_EQ(ls.GetAttr<Ops>("grad_to_block_id"), (Ops{"fc_b.delta:1", "fc_w.block1.delta:2"}));
  ASSERT_EQ(ps.NumBlocks(), 3u);
  const OpDesc& sum = ps.Block(2).Op(0);
  EXPECT_EQ(sum.type, "sum");
  EXPECT_EQ(sum.Input("X"), (Ops{"fc_w.block1", "fc_w.block1.delta"}));
  EXPECT_EQ(sum.Output("Out"), (Ops{"fc_w.block1"}));
}

TEST(AsyncModesTest, TheModesOfAsyncTrainingRefuseSyncMode) {
  DistributeTranspilerConfig c;
  c.half_async = true;
  EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument);
  c.half_async = false;
  c.geo_sgd_mode = true;
  EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument);
  c.sync_mode = false;
  c.geo_sgd_need_push_nums = 0;
  EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument);
  auto sync_call = TranspileNet({}, DistributeTranspilerConfig::HalfAsyncStrategy(), 0, 2, /*sync=*/true);
  EXPECT_EQ(sync_call.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace oar
