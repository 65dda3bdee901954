// StepJournal: a sync trainer's step is kept for replay until its
// FETCH_BARRIER; an async trainer (the same variable sent again before any
// FETCH_BARRIER after its initial pull) has nothing kept, so its journal
// does not grow with every gradient it ever sent.
#include "common/rpc/step_journal.h"

#include "gtest/gtest.h"

namespace oar::rpc {
namespace {

std::vector<std::string> Replayed(StepJournal& j) {
  std::vector<std::string> out;
  absl::Status s = j.Resync(
      0, "ep", /*resyncs_seen=*/0, [](int64_t) -> absl::StatusOr<int64_t> { return 0; },
      [&](const std::string& name, const Variable*) {
        out.push_back(name);
        return absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(StepJournalTest, ASyncStepIsKeptForReplay) {
  StepJournal j;
  Variable v;
  *v.GetMutable<Tensor>() = MakeTensor<float>({1}, {1});
  j.StepDone(0, "ep");  // the initial pull
  j.AddSend(0, "ep", "g", v);
  j.AddSend(0, "ep", "h", v);
  const auto r = Replayed(j);
  ASSERT_GE(r.size(), 2u);
  EXPECT_EQ(r[0], "g");
  EXPECT_EQ(r[1], "h");
}

TEST(StepJournalTest, AnAsyncTrainersGradientsAreNotKept) {
  StepJournal j;
  Variable v;
  *v.GetMutable<Tensor>() = MakeTensor<float>({1}, {1});
  j.StepDone(0, "ep");  // the initial pull; then steps with no FETCH_BARRIER
  for (int step = 0; step < 100; ++step) j.AddSend(0, "ep", "g", v);
  EXPECT_TRUE(Replayed(j).empty());
}

}  // namespace
}  // namespace oar::rpc
