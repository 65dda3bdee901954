// CommittedState: a commit is a copy (later training does not touch it), a
// restore writes it back into the scope's own buffers, and over a new ring
// every rank — a joiner with only its startup values, a survivor that
// committed earlier — ends with the newest commit any rank holds.
#include "trainer/committed_state.h"

#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/collective/inprocess_collective.h"

namespace oar {
namespace {

std::unique_ptr<Scope> WithWeights(float w, float moment) {
  auto s = std::make_unique<Scope>();
  float* v = s->Var("w")->GetMutable<Tensor>()->mutable_data<float>({2});
  v[0] = v[1] = w;
  s->Var("m")->GetMutable<Tensor>()->mutable_data<float>({1})[0] = moment;
  return s;
}

float At(Scope& s, const std::string& name, int i = 0) { return s.FindVar(name)->Get<Tensor>().data<float>()[i]; }

TEST(CommittedStateTest, ACommitIsACopyThatRestoreWritesBackIntoTheSameBuffers) {
  std::unique_ptr<Scope> owned = WithWeights(1, 5);
  Scope& s = *owned;
  CommittedState state;
  EXPECT_FALSE(state.has());
  ASSERT_TRUE(state.Commit(s, {"w", "m"}, {.step = 10, .epoch = 2, .offset = 640}).ok());
  float* buffer = s.Var("w")->GetMutable<Tensor>()->mutable_data<float>({2});
  buffer[0] = buffer[1] = 7;  // the steps after the commit
  s.Var("m")->GetMutable<Tensor>()->mutable_data<float>({1})[0] = 9;
  ASSERT_TRUE(state.Restore(&s).ok());
  EXPECT_EQ(s.Var("w")->GetMutable<Tensor>()->mutable_data<float>({2}), buffer);
  EXPECT_EQ(At(s, "w", 0), 1);
  EXPECT_EQ(At(s, "w", 1), 1);
  EXPECT_EQ(At(s, "m"), 5);
  EXPECT_EQ(state.position().step, 10);
  EXPECT_EQ(state.position().epoch, 2);
  EXPECT_EQ(state.position().offset, 640);
  EXPECT_FALSE(state.Commit(s, {"nosuch"}, {}).ok());
}

TEST(CommittedStateTest, EveryRankOfANewRingTakesTheNewestCommitAnyRankHolds) {
  // Rank 0: a joiner (startup values, no commit). Rank 1: a survivor that
  // committed step 20, then trained on (rolled back by Agree). Rank 2: a
  // survivor whose last commit is step 10.
  InProcessGroup group(3, absl::Seconds(10));
  std::vector<std::unique_ptr<Scope>> scopes;
  scopes.push_back(WithWeights(0, 0));
  scopes.push_back(WithWeights(3, 30));
  scopes.push_back(WithWeights(2, 20));
  std::vector<CommittedState> states(3);
  ASSERT_TRUE(states[1].Commit(*scopes[1], {"w", "m"}, {.step = 20, .epoch = 1, .offset = 1920}).ok());
  ASSERT_TRUE(states[2].Commit(*scopes[2], {"w", "m"}, {.step = 10, .epoch = 1, .offset = 960}).ok());
  scopes[1]->Var("w")->GetMutable<Tensor>()->mutable_data<float>({2})[0] = 99;  // after its commit
  std::vector<absl::StatusOr<int>> roots(3, -1);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      std::unique_ptr<Collective> c = group.Rank(r);
      roots[r] = states[r].Agree(c.get(), scopes[r].get(), {"m", "w"});
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(roots[r].ok()) << roots[r].status();
    EXPECT_EQ(*roots[r], 1);
    EXPECT_EQ(At(*scopes[r], "w", 0), 3) << "rank " << r;
    EXPECT_EQ(At(*scopes[r], "w", 1), 3) << "rank " << r;
    EXPECT_EQ(At(*scopes[r], "m"), 30) << "rank " << r;
    ASSERT_TRUE(states[r].has());
    EXPECT_EQ(states[r].position().step, 20);
    EXPECT_EQ(states[r].position().offset, 1920);
  }
}

TEST(CommittedStateTest, WithNoCommitAnywhereRankZerosValuesStartTheJob) {
  InProcessGroup group(2, absl::Seconds(10));
  std::vector<std::unique_ptr<Scope>> scopes;
  scopes.push_back(WithWeights(4, 1));
  scopes.push_back(WithWeights(8, 2));
  std::vector<CommittedState> states(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      std::unique_ptr<Collective> c = group.Rank(r);
      ASSERT_TRUE(states[r].Agree(c.get(), scopes[r].get(), {"w", "m"}).ok());
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(At(*scopes[r], "w"), 4);
    EXPECT_EQ(At(*scopes[r], "m"), 1);
    EXPECT_EQ(states[r].position().step, 0);
    EXPECT_EQ(states[r].position().epoch, 1);
  }
}

}  // namespace
}  // namespace oar
