// ParallelFor: every element once, in disjoint ranges of at least the
// grain; small ranges and a null pool stay on the caller; callers that are
// themselves the pool's threads (all of them at once) finish.
#include "common/base/parallel_for.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/base/thread_pool.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(ParallelForTest, CoversEachElementOnceInRangesOfAtLeastTheGrain) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 999, 1000, 1999, 2000, 12345, 100000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    absl::Mutex mu;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    ParallelFor(&pool, n, 1000, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      absl::MutexLock l(&mu);
      ranges.push_back({lo, hi});
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n " << n << " i " << i;
    for (const auto& [lo, hi] : ranges) {
      if (n >= 2000) EXPECT_GE(hi - lo, 1000) << "n " << n;
    }
    EXPECT_LE(ranges.size(), 4u);  // the caller and the pool's 3 threads
    if (n > 0 && n < 2000) EXPECT_EQ(ranges.size(), 1u) << "n " << n;
  }
}

TEST(ParallelForTest, WithoutAPoolTheCallerRunsItAll) {
  const std::thread::id me = std::this_thread::get_id();
  int calls = 0;
  ParallelFor(nullptr, 1 << 20, 10, [&](int64_t lo, int64_t hi) {
    EXPECT_EQ(std::this_thread::get_id(), me);
    EXPECT_EQ(lo, 0);
    EXPECT_EQ(hi, 1 << 20);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
}

// Every pool thread in a ParallelFor over the same pool: none may wait for
// a helper that cannot start.
TEST(ParallelForTest, ThePoolsOwnThreadsMayCallItAllAtOnce) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  absl::Mutex mu;
  int finished = 0;
  for (int t = 0; t < 2; ++t) {
    pool.Schedule([&] {
      ParallelFor(&pool, 100000, 1000, [&](int64_t lo, int64_t hi) { sum.fetch_add(hi - lo); });
      absl::MutexLock l(&mu);
      ++finished;
    });
  }
  absl::MutexLock l(&mu);
  ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(
                                      +[](int* f) { return *f == 2; }, &finished),
                                  absl::Seconds(30)));
  EXPECT_EQ(sum.load(), 200000);
}

}  // namespace
}  // namespace oar
