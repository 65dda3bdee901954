// A sparse table that Fluid's layers.embedding marks remote_prefetch (and
// not is_distributed) stays on the pservers: the trainer program receives
// it no more each step (no recv of its blocks, no concat, not among
// fetch_barrier's outputs), its lookups carry the blocks' epmap,
// table_names, height_sections and trainer_id (Fluid 1.5's
// _update_remote_sparse_update_op), and the trainer's startup still pulls
// it once. The program is the Fluid 1.5 CTR DNN fixture (its
// SparseFeatFactors table is large enough to be cut into two blocks); its
// 2 × 2 training to Paddle's losses is PaddleFixtureDistTest's.
#include <algorithm>

#include "gtest/gtest.h"
#include "tests/common/paddle/paddle_fixture.h"
#include "transpiler/distribute_transpiler.h"

namespace oar {
namespace {

constexpr char kTable[] = "SparseFeatFactors";

bool Mentions(const std::vector<std::string>& names, const std::string& prefix) {
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
}

TEST(RemotePrefetchTest, TrainerReadsTheTablesRowsFromThePserversInsteadOfReceivingIt) {
  const paddle_fixture::Fixture f = paddle_fixture::Load("fluid15_ctr_dnn");
  ASSERT_TRUE(f.main && f.startup);
  ProgramDesc main = *f.main, startup = *f.startup;
  DistributeTranspiler tr;
  ASSERT_TRUE(tr.transpile(1, &main, "127.0.0.1:6170,127.0.0.1:6171", 2, true, &startup).ok());
  auto trainer = tr.get_trainer_program(/*wait_port=*/false);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const BlockDesc& b = trainer->Block(0);
  int lookups = 0;
  for (size_t i = 0; i < b.OpSize(); ++i) {
    const OpDesc& op = b.Op(i);
    if (op.type == "recv" || op.type == "fetch_barrier") {
      EXPECT_FALSE(Mentions(op.Output("Out"), kTable)) << op.type << " still brings the table";
    }
    if (op.type == "concat") {
      EXPECT_FALSE(Mentions(op.Output("Out"), kTable));
    }
    if (op.type != "lookup_table") continue;
    ++lookups;
    EXPECT_EQ(op.GetAttr<std::vector<std::string>>("table_names"),
              (std::vector<std::string>{"SparseFeatFactors.block0", "SparseFeatFactors.block1"}));
    EXPECT_EQ(op.GetAttr<std::vector<int64_t>>("height_sections"), (std::vector<int64_t>{1050, 1050}));
    EXPECT_EQ(op.GetAttr<std::vector<std::string>>("epmap").size(), 2u);
    EXPECT_EQ(op.GetAttr<int32_t>("trainer_id"), 1);
  }
  EXPECT_EQ(lookups, 4);
  // The gradient still goes up, split by block.
  bool sent = false;
  for (size_t i = 0; i < b.OpSize(); ++i) {
    if (b.Op(i).type == "send") sent |= Mentions(b.Op(i).Input("X"), std::string(kTable) + "@GRAD");
  }
  EXPECT_TRUE(sent);
  // The startup pulls it once, whole.
  bool pulled = false;
  const BlockDesc& s = startup.Block(0);
  for (size_t i = 0; i < s.OpSize(); ++i) {
    if (s.Op(i).type == "recv") pulled |= Mentions(s.Op(i).Output("Out"), kTable);
  }
  EXPECT_TRUE(pulled);
}

}  // namespace
}  // namespace oar
