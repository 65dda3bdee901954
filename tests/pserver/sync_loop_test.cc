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

TEST(SyncLoopTest, OneOptimizePassPerStepAndTheReceivingHookAsEachStepReceives) {
  StepBarrier b(2, absl::Seconds(30));
  std::atomic<int> passes{0}, receiving{0};
  SyncLoop loop(&b, {.receiving = [&] { ++receiving; },
                     .optimize =
                         [&] {
                           ++passes;
                           return absl::OkStatus();
                         }});
  absl::Status ran;
  std::thread server([&] { ran = loop.Run(); });
  std::vector<absl::Status> trainer(2);
  std::thread t0([&] { trainer[0] = Trainer(&b, 0, 5); }), t1([&] { trainer[1] = Trainer(&b, 1, 5); });
  t0.join();
  t1.join();
  server.join();
  EXPECT_TRUE(ran.ok()) << ran;
  EXPECT_TRUE(trainer[0].ok()) << trainer[0];
  EXPECT_TRUE(trainer[1].ok()) << trainer[1];
  EXPECT_EQ(passes.load(), 5);
  EXPECT_EQ(loop.steps(), 5);
  EXPECT_EQ(receiving.load(), 5);  // once per step: the first receives after the initial pull
  EXPECT_EQ(b.step(), 5);
}

TEST(SyncLoopTest, AFailedPassEndsTheBarrierAndTheTrainersHearWhy) {
  StepBarrier b(2, absl::Seconds(30));
  int passes = 0;
  SyncLoop loop(
      &b, {.optimize = [&] { return ++passes == 2 ? absl::InternalError("block 3: sgd failed") : absl::OkStatus(); }});
  absl::Status ran;
  std::thread server([&] { ran = loop.Run(); });
  std::vector<absl::Status> trainer(2);
  std::thread t0([&] { trainer[0] = Trainer(&b, 0, 5); }), t1([&] { trainer[1] = Trainer(&b, 1, 5); });
  t0.join();
  t1.join();
  server.join();
  EXPECT_EQ(ran.message(), "block 3: sgd failed");
  EXPECT_EQ(loop.steps(), 1);
  for (const absl::Status& s : trainer) EXPECT_NE(s.message().find("block 3: sgd failed"), std::string::npos) << s;
}

}  // namespace
}  // namespace oar
