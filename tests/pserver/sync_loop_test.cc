// SyncLoop alone, over a real StepBarrier with trainers as threads: one
// optimize pass per step, `receiving` as each step starts to receive, and
// a failed pass ends the barrier so the trainers hear its reason.
#include "pserver/sync_loop.h"

#include <atomic>
#include <thread>
#include <vector>

#include "common/base/status.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

// One trainer: the initial pull, `steps` steps, COMPLETE; the first error.
absl::Status Trainer(StepBarrier* b, int id, int steps) {
  OAR_RETURN_IF_ERROR(b->BeforeGet(id));
  OAR_RETURN_IF_ERROR(b->FetchBarrier(id));
  for (int i = 0; i < steps; ++i) {
    OAR_RETURN_IF_ERROR(b->BeginReceive(id));
    b->EndReceive(id, true);
    OAR_RETURN_IF_ERROR(b->BatchBarrier(id));
    OAR_RETURN_IF_ERROR(b->BeforeGet(id));
    if (b->step() != i + 1) return absl::InternalError("a Get saw another step's parameters");
    OAR_RETURN_IF_ERROR(b->FetchBarrier(id));
  }
  return b->Complete(id);
}

// Runs `loop` and two trainers of `steps` steps to the end; the loop's
// status, then each trainer's.
std::vector<absl::Status> RunJob(StepBarrier* b, SyncLoop* loop, int steps) {
  std::vector<absl::Status> out(3);
  std::thread server([&] { out[0] = loop->Run(); });
  std::thread t0([&] { out[1] = Trainer(b, 0, steps); }), t1([&] { out[2] = Trainer(b, 1, steps); });
  t0.join();
  t1.join();
  server.join();
  return out;
}

TEST(SyncLoopTest, OneOptimizePassPerStepAndTheReceivingHookAsEachStepReceives) {
  StepBarrier b(2, absl::Seconds(30));
  std::atomic<int> passes{0}, receiving{0};
  SyncLoop loop(&b, {.receiving = [&] { ++receiving; },
                     .optimize =
                         [&] {
                           ++passes;
                           return absl::OkStatus();
                         }});
  for (const absl::Status& s : RunJob(&b, &loop, 5)) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(passes.load(), 5);
  EXPECT_EQ(loop.steps(), 5);
  // Once per step as it starts to receive, and once more when the last
  // step's pulls end before the trainers' COMPLETE has come.
  EXPECT_GE(receiving.load(), 5);
  EXPECT_LE(receiving.load(), 6);
  EXPECT_EQ(b.step(), 5);
}

TEST(SyncLoopTest, AFailedPassEndsTheBarrierAndTheTrainersHearWhy) {
  StepBarrier b(2, absl::Seconds(30));
  int passes = 0;
  SyncLoop loop(
      &b, {.optimize = [&] { return ++passes == 2 ? absl::InternalError("block 3: sgd failed") : absl::OkStatus(); }});
  const std::vector<absl::Status> out = RunJob(&b, &loop, 5);
  EXPECT_EQ(out[0].message(), "block 3: sgd failed");
  EXPECT_EQ(loop.steps(), 1);
  EXPECT_NE(out[1].message().find("block 3: sgd failed"), std::string::npos) << out[1];
  EXPECT_NE(out[2].message().find("block 3: sgd failed"), std::string::npos) << out[2];
}

}  // namespace
}  // namespace oar
