// ResyncGate alone: a restored sync pserver's gate refuses a trainer's calls
// until its RESYNC (letting through its replay and its COMPLETE), answers
// the RESYNC (fetched when the trainer is past the checkpoint's pull), then
// covers the gradients and barriers that process sent before its resync —
// not a later process's, not FETCH_BARRIER or COMPLETE. A gate that was not
// restored lets everything through.
#include "pserver/resync_gate.h"

#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_common.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

constexpr uint64_t kRun = uint64_t{5} << rpc::kSeqCounterBits;  // one process's incarnation

rpc::MessageHeader Msg(const std::string& name, int64_t seq, bool replay = false, int64_t step = 0) {
  rpc::MessageHeader h;
  h.meta.set_varname(name);
  h.meta.set_oar_seq(seq);
  h.meta.set_oar_replay(replay);
  h.meta.set_oar_step(step);
  return h;
}

using V = ResyncGate::Verdict;
constexpr auto kSend = rpc::RpcKind::kSend;

TEST(ResyncGateTest, ATrainerResyncsFirstThenItsEarlierSendsAreCovered) {
  ResyncGate g(/*restored=*/true, /*restored_step=*/4, /*fanin=*/2);
  // Before its resync: refused, naming the step and the trainer ...
  auto early = g.Check(kSend, Msg("w@GRAD", kRun + 10), 1, "pserver p");
  ASSERT_TRUE(absl::IsAborted(early.status())) << early.status();
  EXPECT_EQ(early.status().message(), "pserver p restarted from its checkpoint of step 4: trainer 1 resyncs first");
  EXPECT_TRUE(absl::IsAborted(g.Check(rpc::RpcKind::kGet, Msg("w", kRun + 11), 1, "p").status()));
  // ... but its replay and its COMPLETE pass.
  auto replay = g.Check(kSend, Msg("w@GRAD", kRun + 12, /*replay=*/true), 1, "p");
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(replay->verdict, V::kServe);
  EXPECT_FALSE(replay->resynced);
  // Its RESYNC, having had 6 FETCH_BARRIERs answered (F = 6 > S = 4): fetched.
  auto resync = g.Check(kSend, Msg(rpc::kResync, kRun + 13, true, /*step=*/6), 1, "p");
  ASSERT_TRUE(resync.ok());
  EXPECT_EQ(resync->verdict, V::kCovered);
  EXPECT_TRUE(resync->resynced);
  EXPECT_TRUE(resync->fetched);
  // A gradient that process sent before its RESYNC: covered; after it, served.
  EXPECT_EQ(g.Check(kSend, Msg("w@GRAD", kRun + 10), 1, "p")->verdict, V::kCovered);
  EXPECT_EQ(g.Check(kSend, Msg(rpc::kBatchBarrier, kRun + 9), 1, "p")->verdict, V::kCovered);
  EXPECT_EQ(g.Check(kSend, Msg("w@GRAD", kRun + 14), 1, "p")->verdict, V::kServe);
  // Never covered: FETCH_BARRIER and COMPLETE, a later process's calls, a
  // Get, an unnumbered call.
  EXPECT_EQ(g.Check(kSend, Msg(rpc::kFetchBarrier, kRun + 8), 1, "p")->verdict, V::kServe);
  EXPECT_EQ(g.Check(kSend, Msg(rpc::kComplete, kRun + 8), 1, "p")->verdict, V::kServe);
  EXPECT_EQ(g.Check(kSend, Msg("w@GRAD", (uint64_t{6} << rpc::kSeqCounterBits) + 1), 1, "p")->verdict, V::kServe);
  EXPECT_EQ(g.Check(rpc::RpcKind::kGet, Msg("w", kRun + 8), 1, "p")->verdict, V::kServe);
  EXPECT_EQ(g.Check(kSend, Msg("w@GRAD", 0), 1, "p")->verdict, V::kServe);
  // Trainer 0 has not resynced: still refused, its COMPLETE let through.
  EXPECT_TRUE(absl::IsAborted(g.Check(kSend, Msg("w@GRAD", kRun + 1), 0, "p").status()));
  EXPECT_EQ(g.Check(kSend, Msg(rpc::kComplete, kRun + 2), 0, "p")->verdict, V::kServe);
}

TEST(ResyncGateTest, ATrainerThatHadNotPulledIsNotCountedAsFetched) {
  ResyncGate g(true, 4, 1);
  auto at_start = g.Check(kSend, Msg(rpc::kResync, kRun + 1, true, /*step=*/0), 0, "p");
  ASSERT_TRUE(at_start.ok());
  EXPECT_TRUE(at_start->resynced);
  EXPECT_FALSE(at_start->fetched);
  ResyncGate h(true, 4, 1);
  EXPECT_FALSE(h.Check(kSend, Msg(rpc::kResync, kRun + 1, true, /*step=*/4), 0, "p")->fetched);  // F = S
}

TEST(ResyncGateTest, AGateNotRestoredLetsEverythingThrough) {
  ResyncGate g(false, 0, 2);
  for (const char* name : {"w@GRAD", rpc::kResync, rpc::kBatchBarrier}) {
    auto p = g.Check(kSend, Msg(name, kRun + 1), 0, "p");
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ(p->verdict, V::kServe) << name;
    EXPECT_FALSE(p->resynced) << name;
  }
}

}  // namespace
}  // namespace oar
