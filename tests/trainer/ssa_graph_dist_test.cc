// The SSA graph of a transpiled trainer program on several places: the RPC
// and Dist ops run once, on place 0, after the gradients' all-reduce, and
// every parameter they pull is broadcast from place 0 afterwards.
#include <set>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "gtest/gtest.h"
#include "trainer/ssa_graph.h"
#include "transpiler/distribute_transpiler.h"

namespace oar {
namespace {

TEST(SsaGraphDistTest, RpcOpsRunOnPlaceZeroAndPulledParametersAreBroadcast) {
  UniqueNameGuard names;
  Program main, startup;
  {
    ProgramGuard g(&main, &startup);
    Var y = layers::fc(layers::fc(layers::data("x", {128}), 128, "relu"), 1);
    optimizer::SGD(0.1f).minimize(layers::mean(y));
  }
  DistributeTranspiler t;
  ASSERT_TRUE(t.transpile(0, &main.desc(), "127.0.0.1:1,127.0.0.1:2", 2, true, &startup.desc()).ok());
  auto trainer = t.get_trainer_program(false);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const BlockDesc& b = trainer->Block(0);
  for (GradientMode mode : {GradientMode::kAllReduce, GradientMode::kReduce}) {
    const SsaGraph g = BuildSsaGraph(b, 3, mode);
    std::map<std::string, int> rpc_places;
    std::set<std::string> broadcast;
    size_t all_reduce = 0;
    for (const OpHandle& h : g.ops) {
      if (h.kind == OpHandle::Kind::kBroadcast) broadcast.insert(h.var);
      if (h.kind == OpHandle::Kind::kAllReduce) ++all_reduce;
      if (h.kind == OpHandle::Kind::kReduce) ADD_FAILURE() << "Reduce in a program that sends: place 0 needs full sums";
      if (h.kind != OpHandle::Kind::kCompute) continue;
      const OpDesc& op = b.Op(h.op_index);
      if (op.role() & (static_cast<int32_t>(OpRole::kRPC) | static_cast<int32_t>(OpRole::kDist))) {
        EXPECT_EQ(h.place, 0u) << h.label;
        ++rpc_places[op.type];
      }
    }
    EXPECT_EQ(rpc_places["send_barrier"], 1);
    EXPECT_EQ(rpc_places["fetch_barrier"], 1);
    EXPECT_EQ(rpc_places["send"], 4);  // one per parameter
    EXPECT_EQ(all_reduce, 4u * 3u);    // every gradient, one slice per place
    EXPECT_EQ(broadcast, (std::set<std::string>{"fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"}));
  }
  // One place: nothing to all-reduce or broadcast.
  for (const OpHandle& h : BuildSsaGraph(b, 1, GradientMode::kNone).ops) EXPECT_EQ(h.kind, OpHandle::Kind::kCompute);
}

}  // namespace
}  // namespace oar
