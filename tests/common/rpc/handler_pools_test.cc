// HandlerPools: what is queued runs before Stop returns; what comes after
// is refused; and scheduling from other threads while Stop runs is safe
// (the in-process transport's clients do that to a server shutting down —
// TSan caught the pools being destroyed under a TrySchedule).
#include "common/rpc/handler_pools.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace oar::rpc {
namespace {

TEST(HandlerPoolsTest, StopRunsWhatIsQueuedThenRefuses) {
  ServerOptions o;
  o.send_threads = 1;
  HandlerPools pools(o);
  absl::Notification release;
  std::atomic<int> ran{0};
  ASSERT_TRUE(pools.TrySchedule(RpcKind::kSend, [&] {
    release.WaitForNotification();
    ++ran;
  }));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pools.TrySchedule(RpcKind::kSend, [&] { ++ran; }));
  EXPECT_FALSE(pools.stopped());
  std::thread stopper([&] { pools.Stop(); });
  release.Notify();
  stopper.join();
  EXPECT_EQ(ran.load(), 6);
  EXPECT_TRUE(pools.stopped());
  EXPECT_FALSE(pools.TrySchedule(RpcKind::kSend, [&] { ++ran; }));
  EXPECT_EQ(ran.load(), 6);
}

TEST(HandlerPoolsTest, SchedulingWhileStoppingRunsExactlyWhatWasAccepted) {
  for (int round = 0; round < 20; ++round) {
    HandlerPools pools(ServerOptions{});
    std::atomic<int> accepted{0}, ran{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> clients;
    for (int t = 0; t < 3; ++t) {
      clients.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        const RpcKind kind = t == 0 ? RpcKind::kSend : t == 1 ? RpcKind::kGet : RpcKind::kGetNoBarrier;
        while (true) {  // until refused for having stopped (a full queue is retried)
          if (pools.TrySchedule(kind, [&] { ++ran; })) {
            ++accepted;
          } else if (pools.stopped()) {
            break;
          }
        }
      });
    }
    go = true;
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 5)));
    pools.Stop();
    for (auto& c : clients) c.join();
    EXPECT_TRUE(pools.stopped());
    EXPECT_EQ(ran.load(), accepted.load()) << "round " << round;
  }
}

}  // namespace
}  // namespace oar::rpc
