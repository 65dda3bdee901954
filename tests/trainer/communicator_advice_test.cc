// CommunicatorAdvice on transpiled async programs: a sparse embedding kept
// whole on the trainer, pulled whole on every receive, is named with its
// shape and what to do once it reaches the size bound; a distributed table
// (its rows prefetched) and dense parameters never are.
#include "trainer/communicator_advice.h"

#include "gtest/gtest.h"
#include "tests/util/ps_job.h"

namespace oar {
namespace {

TEST(CommunicatorAdviceTest, AWholeSparseTableAtTheBoundIsNamedWithItsShapeAndTheRemedy) {
  PserverJob job(DistributeTranspilerConfig::AsyncStrategy(), 1, SparseEmbeddingNet(0.5f));
  auto contexts = ContextsOf(job.trainer[0]);
  ASSERT_TRUE(contexts.ok()) << contexts.status();
  const int64_t table_bytes = 4096 * 8 * 4;
  const std::vector<std::string> advice = CommunicatorAdvice(job.trainer[0], *contexts, table_bytes);
  ASSERT_EQ(advice.size(), 1u);
  for (const char* part :
       {"'emb' (4096 x 8, 0.1 MB)", "2 pserver block(s)", "is_distributed=True", "--runtime_split_send_recv"}) {
    EXPECT_NE(advice[0].find(part), std::string::npos) << part << " in: " << advice[0];
  }
  EXPECT_TRUE(CommunicatorAdvice(job.trainer[0], *contexts, table_bytes + 1).empty());
  EXPECT_TRUE(CommunicatorAdvice(job.trainer[0], *contexts).empty());  // 16 MiB by default
  job.Stop();
}

TEST(CommunicatorAdviceTest, DenseParametersAreNeverNamed) {
  PserverJob job(DistributeTranspilerConfig::AsyncStrategy(), 1);
  auto contexts = ContextsOf(job.trainer[0]);
  ASSERT_TRUE(contexts.ok()) << contexts.status();
  ASSERT_FALSE(contexts->recv.empty());
  EXPECT_TRUE(CommunicatorAdvice(job.trainer[0], *contexts, 0).empty());
  job.Stop();
}

TEST(CommunicatorAdviceTest, ADistributedTableIsNeverNamed) {
  PserverJob job(DistributeTranspilerConfig::AsyncStrategy(), 1, [](Program* main, Program* startup) {
    ProgramGuard g(main, startup);
    ParamAttr emb_attr;
    emb_attr.name = "emb";
    Var ids = layers::data("ids", {1}, DataType::kInt64);
    Var emb = layers::embedding(ids, {4096, 8}, /*is_sparse=*/true, /*is_distributed=*/true, -1, emb_attr);
    Var loss = layers::mean(layers::square_error_cost(layers::fc(emb, 1), layers::data("y", {1})));
    optimizer::SGD(0.5f).minimize(loss);
    return loss.name();
  });
  auto contexts = ContextsOf(job.trainer[0]);
  ASSERT_TRUE(contexts.ok()) << contexts.status();
  EXPECT_TRUE(CommunicatorAdvice(job.trainer[0], *contexts, 0).empty());
  job.Stop();
}

}  // namespace
}  // namespace oar
