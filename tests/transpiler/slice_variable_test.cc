#include "transpiler/slice_variable.h"

#include <set>

#include "gtest/gtest.h"
#include "transpiler/ps_dispatcher.h"

namespace oar {
namespace {

struct Row {
  std::vector<int64_t> shape;
  int64_t slices, min_block;
  std::vector<int64_t> sizes;
};

class SliceVariableTest : public ::testing::TestWithParam<Row> {};

TEST_P(SliceVariableTest, FollowsFluidsRule) {
  const Row r = GetParam();
  std::vector<VarBlock> blocks = SliceVariable({{"v", r.shape}}, r.slices, r.min_block);
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(blocks[i].block_id, static_cast<int64_t>(i));
    sizes.push_back(blocks[i].size);
  }
  EXPECT_EQ(sizes, r.sizes);
}

INSTANTIATE_TEST_SUITE_P(Table, SliceVariableTest,
                         ::testing::Values(Row{{1000, 100}, 3, 8192, {33400, 33400, 33200}},  // rows of 100, rounded up
                                           Row{{10}, 2, 8192, {10}},               // below min_block_size: one block
                                           Row{{20000}, 3, 8192, {10000, 10000}},  // at most numel / min blocks
                                           Row{{100, 200}, 2, 8192, {10000, 10000}}, Row{{3, 5000}, 2, 8192, {15000}},
                                           Row{{7, 3000}, 2, 8192, {12000, 9000}},  // whole rows: 4 + 3
                                           Row{{100000}, 4, 8192, {25000, 25000, 25000, 25000}},
                                           Row{{784, 256}, 2, 1048576, {200704}}));

TEST(SliceVariableTest, NamesAsFluidWritesThem) {
  EXPECT_EQ(BlockName("fc_w", 0), "fc_w.block0");
  EXPECT_EQ(TrainerVarName(BlockName("fc_w@GRAD", 1), 0), "fc_w@GRAD.block1.trainer_0");
  EXPECT_EQ(TrainerVarName("fc_b@GRAD", 1), "fc_b@GRAD.trainer_1");
  EXPECT_EQ((VarBlock{"fc_w", 2, 33200}).ToString(), "fc_w:2:33200");
}

TEST(PSDispatcherTest, RoundRobinTakesTurnsAndResets) {
  RoundRobin rr({"a:1", "b:2"});
  EXPECT_EQ(rr.Dispatch({"x", "y", "z"}), (std::vector<std::string>{"a:1", "b:2", "a:1"}));
  EXPECT_EQ(rr.Dispatch({"w"}), (std::vector<std::string>{"b:2"}));
  rr.Reset();
  EXPECT_EQ(rr.Dispatch({"w"}), (std::vector<std::string>{"a:1"}));
}

TEST(PSDispatcherTest, HashNameIsStableAndSpreads) {
  HashName h({"a:1", "b:2", "c:3"});
  std::vector<std::string> names;
  for (int i = 0; i < 30; ++i) names.push_back("fc_" + std::to_string(i) + ".w_0");
  const auto first = h.Dispatch(names);
  EXPECT_EQ(HashName({"a:1", "b:2", "c:3"}).Dispatch(names), first);  // same in every process
  EXPECT_EQ(std::set<std::string>(first.begin(), first.end()).size(), 3u);
  EXPECT_EQ(StableHash("a"), 0xaf63dc4c8601ec8cull);  // FNV-1a's published value
}

}  // namespace
}  // namespace oar
