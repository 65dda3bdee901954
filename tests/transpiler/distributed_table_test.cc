// The DistributeTranspiler on a distributed lookup table: the trainer and
// pserver programs are op for op what Fluid 1.6's transpiler writes
// (split_ids → prefetch → merge_ids in place of the lookups; the gradient
// split by id and sent; on each pserver the table's shard, its optimize,
// prefetch and checkpoint blocks), in sync and async mode.
#include "gtest/gtest.h"
#include "tests/transpiler/fc_net.h"
#include "tests/transpiler/table_net.h"
#include "transpiler/distribute_transpiler.h"

namespace oar {
namespace {

using Ops = std::vector<std::string>;
namespace proto = paddle::framework::proto;

struct Transpiled {
  ProgramDesc trainer, trainer_startup;
  std::vector<ProgramDesc> pserver, pserver_startup;
};

Transpiled Transpile(const std::string& opt, bool sync, int trainer_id = 1) {
  TableNet net(opt);
  DistributeTranspiler t;
  absl::Status s = t.transpile(trainer_id, &net.main.desc(), kTwoPservers, 2, sync, &net.startup.desc());
  EXPECT_TRUE(s.ok()) << s;
  Transpiled out;
  out.trainer = *t.get_trainer_program(false);
  out.trainer_startup = *t.get_trainer_startup_program();
  for (const char* ep : {"127.0.0.1:6174", "127.0.0.1:6175"}) {
    auto pair = t.get_pserver_programs(ep);
    EXPECT_TRUE(pair.ok()) << pair.status();
    out.pserver.push_back(pair->first);
    out.pserver_startup.push_back(pair->second);
  }
  return out;
}

// The block listen_and_serv's grad_to_block_id gives `grad`; -1 if none.
int32_t BlockOfGrad(const OpDesc& ls, const std::string& grad) {
  for (const auto& e : ls.GetAttr<Ops>("grad_to_block_id")) {
    if (e.rfind(grad + ":", 0) == 0) return std::stoi(e.substr(grad.size() + 1));
  }
  return -1;
}

size_t IndexOf(const BlockDesc& b, const std::string& type, size_t from = 0) {
  for (size_t i = from; i < b.OpSize(); ++i) {
    if (b.Op(i).type == type) return i;
  }
  return b.OpSize();
}

TEST(DistributedTableTest, TrainerPrefetchesTheRowsAndSendsTheGradientSplitById) {
  const Transpiled t = Transpile("sgd", /*sync=*/true);
  const BlockDesc& b = t.trainer.Block(0);
  const Ops types = OpTypes(b);
  EXPECT_EQ(std::count(types.begin(), types.end(), "lookup_table"), 0);
  // The lookups' place: the first ops of the program.
  ASSERT_GE(b.OpSize(), 3u);
  EXPECT_EQ((Ops{types[0], types[1], types[2]}), (Ops{"split_ids", "prefetch", "merge_ids"}));
  const Ops in = {"prefetch_compress_in_tmp_0", "prefetch_compress_in_tmp_1"};
  const Ops out = {"prefetch_compress_out_tmp_0", "prefetch_compress_out_tmp_1"};
  EXPECT_EQ(b.Op(0).Input("Ids"), (Ops{"ids", "ids2"}));
  EXPECT_EQ(b.Op(0).Output("Out"), in);
  EXPECT_EQ(b.Op(1).Input("X"), in);
  EXPECT_EQ(b.Op(1).Output("Out"), out);
  EXPECT_EQ(b.Op(1).GetAttr<Ops>("epmap"), (Ops{"127.0.0.1:6174", "127.0.0.1:6175"}));
  EXPECT_EQ(b.Op(2).Input("Ids"), (Ops{"ids", "ids2"}));
  EXPECT_EQ(b.Op(2).Input("Rows"), in);
  EXPECT_EQ(b.Op(2).Input("X"), out);
  EXPECT_EQ(b.Op(2).Output("Out").size(), 2u);
  EXPECT_EQ(b.FindVar("prefetch_compress_in_tmp_0")->dtype, DataType::kInt64);
  // The gradient: right after the op that computes it, split by id, sent.
  const int64_t writer = [&] {
    for (size_t i = b.OpSize(); i-- > 0;) {
      for (const auto& o : b.Op(i).OutputArgNames()) {
        if (o == "emb@GRAD") return static_cast<int64_t>(i);
      }
    }
    return int64_t{-1};
  }();
  ASSERT_GE(writer, 0);
  const OpDesc& split = b.Op(static_cast<size_t>(writer + 1));
  const OpDesc& send = b.Op(static_cast<size_t>(writer + 2));
  const Ops parts = {"emb@GRAD.trainer_1.pserver_0", "emb@GRAD.trainer_1.pserver_1"};
  EXPECT_EQ(split.type, "split_ids");
  EXPECT_EQ(split.Input("Ids"), (Ops{"emb@GRAD"}));
  EXPECT_EQ(split.Output("Out"), parts);
  EXPECT_EQ(split.role(), static_cast<int32_t>(OpRole::kDist));
  EXPECT_EQ(send.type, "send");
  EXPECT_EQ(send.Input("X"), parts);
  EXPECT_EQ(send.GetAttr<Ops>("epmap"), (Ops{"127.0.0.1:6174", "127.0.0.1:6175"}));
  EXPECT_EQ(send.GetAttr<Ops>(kOpRoleVarAttr), (Ops{"emb", "emb@GRAD"}));
  EXPECT_EQ(send.role(), static_cast<int32_t>(OpRole::kRPC));
  ASSERT_EQ(send.Output("Out").size(), 1u);
  const OpDesc& barrier = OnlyOp(b, "send_barrier");
  const Ops deps = barrier.Input("X");
  EXPECT_NE(std::find(deps.begin(), deps.end(), send.Output("Out")[0]), deps.end());
  // The table is prefetched, never received whole; its optimizer is gone.
  for (size_t i = 0; i < b.OpSize(); ++i) {
    if (b.Op(i).type == "recv")
      EXPECT_EQ(std::count(b.Op(i).Output("Out").begin(), b.Op(i).Output("Out").end(), "emb"), 0);
    if (b.Op(i).type == "sgd") EXPECT_NE(b.Op(i).Input("Param")[0], "emb");
  }
  // Nor drawn in the trainer's startup: Fluid 1.6's fake_init, with the
  // table's shape, is the only op that writes it there.
  int writers = 0;
  for (size_t i = 0; i < t.trainer_startup.Block(0).OpSize(); ++i) {
    const OpDesc& op = t.trainer_startup.Block(0).Op(i);
    if (op.type == "recv") EXPECT_EQ(std::count(op.Output("Out").begin(), op.Output("Out").end(), "emb"), 0);
    const auto outs = op.OutputArgNames();
    if (std::find(outs.begin(), outs.end(), "emb") == outs.end()) continue;
    ++writers;
    EXPECT_EQ(op.type, "fake_init");
    EXPECT_EQ(op.GetAttr<std::vector<int64_t>>("shape"), (std::vector<int64_t>{kTableRows, 8}));
  }
  EXPECT_EQ(writers, 1);
}

TEST(DistributedTableTest, PserverHoldsTheShardWithTableOptimizePrefetchAndCheckpointBlocks) {
  const Transpiled t = Transpile("sgd", /*sync=*/true);
  for (int p = 0; p < 2; ++p) {
    const ProgramDesc& ps = t.pserver[p];
    const BlockDesc& g = ps.Block(0);
    const VarDesc* table = g.FindVar("emb");
    ASSERT_NE(table, nullptr);
    EXPECT_EQ(table->type, proto::VarType::SELECTED_ROWS);
    EXPECT_EQ(table->shape, (std::vector<int64_t>{kTableRows / 2, 8}));
    EXPECT_TRUE(table->persistable);
    EXPECT_EQ(g.FindVar("kLookupTablePath")->type, proto::VarType::RAW);
    const OpDesc& ls = OnlyOp(g, "listen_and_serv");
    const std::string part = "pserver_" + std::to_string(p);
    // The table's optimize block: the trainers' parts summed, then sgd (Fluid's ops exactly).
    const int32_t table_block = BlockOfGrad(ls, "emb@GRAD");
    ASSERT_GT(table_block, 0);
    const BlockDesc& opt = ps.Block(static_cast<size_t>(table_block));
    EXPECT_EQ(OpTypes(opt), (Ops{"sum", "sgd"}));
    EXPECT_EQ(opt.Op(0).Input("X"), (Ops{"emb@GRAD.trainer_0." + part, "emb@GRAD.trainer_1." + part}));
    EXPECT_EQ(opt.Op(0).Output("Out"), (Ops{"emb@GRAD"}));
    EXPECT_EQ(opt.Op(1).Input("Param"), (Ops{"emb"}));
    EXPECT_EQ(opt.Op(1).Input("Grad"), (Ops{"emb@GRAD"}));
    EXPECT_EQ(opt.Op(1).Output("ParamOut"), (Ops{"emb"}));
    const auto blocks = ls.GetAttr<BlockRefs>("optimize_blocks").idx;
    EXPECT_NE(std::find(blocks.begin(), blocks.end(), table_block), blocks.end());
    // The prefetch block, a child of the table's.
    const Ops prefetch = ls.GetAttr<Ops>("prefetch_var_name_to_block_id");
    ASSERT_EQ(prefetch.size(), 1u);
    const std::string in = "prefetch_compress_in_tmp_" + std::to_string(p);
    ASSERT_EQ(prefetch[0].rfind(in + ":", 0), 0u) << prefetch[0];
    const BlockDesc& pf = ps.Block(static_cast<size_t>(std::stoi(prefetch[0].substr(in.size() + 1))));
    EXPECT_EQ(pf.parent_idx(), table_block);
    EXPECT_EQ(OpTypes(pf), (Ops{"lookup_sparse_table"}));
    EXPECT_EQ(pf.Op(0).Input("Ids"), (Ops{in}));
    EXPECT_EQ(pf.Op(0).Input("W"), (Ops{"emb"}));
    EXPECT_EQ(pf.Op(0).Output("Out"), (Ops{"prefetch_compress_out_tmp_" + std::to_string(p)}));
    EXPECT_TRUE(pf.Op(0).GetAttr<bool>("is_distributed"));
    EXPECT_EQ(pf.Op(0).GetAttr<int64_t>("padding_idx"), -1);
    // The checkpoint block (Fluid's attribute spelling).
    const BlockDesc& ck = ps.Block(static_cast<size_t>(ls.GetAttr<int32_t>("checkpint_block_id")));
    EXPECT_EQ(ck.parent_idx(), table_block);
    EXPECT_EQ(OpTypes(ck), (Ops{"save"}));
    EXPECT_EQ(ck.Op(0).Input("X"), (Ops{"emb"}));
    // The startup initializes the shard with the table's initializer, at the shard's shape.
    const OpDesc& init = OnlyOp(t.pserver_startup[p].Block(0), "uniform_random");
    EXPECT_EQ(init.Output("Out"), (Ops{"emb"}));
    EXPECT_EQ(init.GetAttr<std::vector<int64_t>>("shape"), (std::vector<int64_t>{kTableRows / 2, 8}));
  }
}

TEST(DistributedTableTest, AsyncSendsEachPserverItsPartUnderItsOwnName) {
  const Transpiled t = Transpile("sgd", /*sync=*/false);
  const BlockDesc& b = t.trainer.Block(0);
  const OpDesc* split = nullptr;
  for (size_t i = 0; i < b.OpSize(); ++i) {
    if (b.Op(i).type == "split_ids" && b.Op(i).Input("Ids") == Ops{"emb@GRAD"}) split = &b.Op(i);
  }
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(split->Output("Out"), (Ops{"emb@GRAD.pserver_0", "emb@GRAD.pserver_1"}));
  EXPECT_EQ(IndexOf(b, "send_barrier"), b.OpSize());
  const ProgramDesc& ps = t.pserver[1];
  const OpDesc& ls = OnlyOp(ps.Block(0), "listen_and_serv");
  const int32_t table_block = BlockOfGrad(ls, "emb@GRAD.pserver_1");
  ASSERT_GT(table_block, 0);
  EXPECT_EQ(OpTypes(ps.Block(static_cast<size_t>(table_block))), (Ops{"sgd"}));
  EXPECT_EQ(ps.Block(static_cast<size_t>(table_block)).Op(0).Input("Grad"), (Ops{"emb@GRAD.pserver_1"}));
  EXPECT_EQ(ps.Block(0).FindVar("emb@GRAD"), nullptr);
}

TEST(DistributedTableTest, AdagradKeepsItsMomentAsATableOfTheShardsShape) {
  const Transpiled t = Transpile("adagrad", /*sync=*/true);
  const ProgramDesc& ps = t.pserver[0];
  const OpDesc& ls = OnlyOp(ps.Block(0), "listen_and_serv");
  const int32_t table_block = BlockOfGrad(ls, "emb@GRAD");
  ASSERT_GT(table_block, 0);
  const BlockDesc& opt = ps.Block(static_cast<size_t>(table_block));
  EXPECT_EQ(OpTypes(opt), (Ops{"sum", "adagrad"}));
  const std::string moment = opt.Op(1).Input("Moment")[0];
  const VarDesc* m = ps.Block(0).FindVar(moment);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->type, proto::VarType::SELECTED_ROWS);
  EXPECT_EQ(m->shape, (std::vector<int64_t>{kTableRows / 2, 8}));
  EXPECT_EQ(opt.Op(1).Output("MomentOut"), (Ops{moment}));
}

}  // namespace
}  // namespace oar
