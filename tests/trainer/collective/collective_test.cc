// The Collective backends, N ranks as threads of this process: the TCP ring
// over loopback (real sockets) and the in-process group. All-reduce against
// a plain sum for 1-5 ranks, fp32/fp64/int64, sizes 0, 1, n-1, n+1 (not
// divisible), a size past the small-tensor path, and 64 MiB; broadcast,
// variable-size all-gather and barrier; and the failures: disagreeing
// programs, a peer that dies, a peer that never answers, a stranger's token.
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/util/free_port.h"
#include "trainer/collective/inprocess_collective.h"
#include "trainer/collective/reduce.h"
#include "trainer/collective/tcp_ring.h"

namespace oar {
namespace {

enum class Backend { kRing, kInProcess };

// Makes an n-rank ring on fresh loopback ports, one thread per rank. Tests
// run side by side (ctest -j) and a port found free may be taken by another
// test's ring before this one listens on it: a rank then cannot listen, or
// meets a stranger's ring (refused by the handshake). Those collisions of
// the test harness are retried on new ports, up to 3 times; any other
// error is each rank's status.
std::vector<absl::StatusOr<std::unique_ptr<TcpRing>>> MakeRing(int n, absl::Duration timeout, const std::string& token) {
  std::vector<absl::StatusOr<std::unique_ptr<TcpRing>>> rings;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<std::string> eps;
    for (int r = 0; r < n; ++r) eps.push_back(FreeEndpoint());
    rings.clear();
    for (int r = 0; r < n; ++r) rings.emplace_back(absl::UnknownError("not made"));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        rings[r] = TcpRing::Create({.rank = r, .endpoints = eps, .token = token, .timeout = timeout});
      });
    }
    for (auto& t : threads) t.join();
    bool collided = false;
    for (const auto& ring : rings) {
      collided |= !ring.ok() && (ring.status().code() == absl::StatusCode::kPermissionDenied ||
                                 ring.status().message().find("cannot listen") != std::string::npos);
    }
    if (!collided) break;
  }
  return rings;
}

// Runs fn(rank, collective) on n threads; returns each rank's status.
std::vector<absl::Status> OnRanks(Backend backend, int n, const std::function<absl::Status(int, Collective*)>& fn,
                                  absl::Duration timeout = absl::Seconds(30), const std::string& token = "job") {
  InProcessGroup group(n, timeout);
  std::vector<absl::StatusOr<std::unique_ptr<TcpRing>>> rings;
  if (backend == Backend::kRing) rings = MakeRing(n, timeout, token);
  std::vector<absl::Status> status(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Collective> c;
      if (backend == Backend::kRing) {
        if (!rings[r].ok()) {
          status[r] = rings[r].status();
          return;
        }
        c = *std::move(rings[r]);
      } else {
        c = group.Rank(r);
      }
      status[r] = fn(r, c.get());
    });
  }
  for (auto& t : threads) t.join();
  return status;
}

template <typename T>
Tensor Values(int rank, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<T>((rank + 1) * 3 + (i % 101) - 50);
  return MakeTensor<T>({n}, v);
}

template <typename T>
void CheckAllReduce(Backend backend, int n, int64_t count) {
  auto status = OnRanks(backend, n, [&](int r, Collective* c) -> absl::Status {
    Tensor t = Values<T>(r, count);
    if (absl::Status s = c->AllReduce(&t, "g"); !s.ok()) return s;
    for (int64_t i = 0; i < count; ++i) {
      T want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<T>((q + 1) * 3 + (i % 101) - 50);
      if (t.data<T>()[i] != want) {
        return absl::InternalError(absl::StrCat("rank ", r, " element ", i, ": ", t.data<T>()[i], " want ", want));
      }
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(status[r].ok()) << "n=" << n << " count=" << count << ": " << status[r];
}

class CollectiveTest : public ::testing::TestWithParam<std::tuple<Backend, int>> {};

TEST_P(CollectiveTest, AllReduceEqualsThePlainSum) {
  const auto [backend, n] = GetParam();
  for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{n - 1}, int64_t{n + 1}, int64_t{100003}}) {
    CheckAllReduce<float>(backend, n, count);
    CheckAllReduce<double>(backend, n, count);
    CheckAllReduce<int64_t>(backend, n, count);
  }
}

TEST_P(CollectiveTest, BroadcastAllGatherAndBarrier) {
  const Backend backend = std::get<0>(GetParam());
  const int n = std::get<1>(GetParam());  // not a structured binding: the lambda below captures it
  auto status = OnRanks(backend, n, [&](int r, Collective* c) -> absl::Status {
    for (int root = 0; root < n; ++root) {
      Tensor t = Values<float>(r, 70000 + root);
      if (absl::Status s = c->Broadcast(&t, root, "w"); !s.ok()) return s;
      if (TensorToVector<float>(t) != TensorToVector<float>(Values<float>(root, 70000 + root))) {
        return absl::InternalError(absl::StrCat("rank ", r, " got another tensor from root ", root));
      }
    }
    Tensor mine = Values<int64_t>(r, r * 1000 + 1);  // every rank a different size
    std::vector<Tensor> all;
    if (absl::Status s = c->AllGather(mine, &all, "rows"); !s.ok()) return s;
    for (int q = 0; q < n; ++q) {
      if (TensorToVector<int64_t>(all[q]) != TensorToVector<int64_t>(Values<int64_t>(q, q * 1000 + 1))) {
        return absl::InternalError(absl::StrCat("rank ", r, ": block ", q, " differs"));
      }
    }
    return c->Barrier();
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(status[r].ok()) << status[r];
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectiveTest,
                         ::testing::Combine(::testing::Values(Backend::kRing, Backend::kInProcess),
                                            ::testing::Values(1, 2, 3, 4, 5)),
                         [](const auto& info) {
                           return absl::StrCat(std::get<0>(info.param) == Backend::kRing ? "Ring" : "InProcess",
                                               std::get<1>(info.param));
                         });

TEST(CollectiveTest, RingAllReducesSixtyFourMiB) {
  for (int n : {2, 4}) CheckAllReduce<float>(Backend::kRing, n, int64_t{16} << 20);
}

TEST(CollectiveTest, Fp16AddsOnEveryBackend) {
  for (Backend b : {Backend::kRing, Backend::kInProcess}) {
    auto status = OnRanks(b, 3, [](int r, Collective* c) -> absl::Status {
      Tensor t;
      t.Resize({5});
      t.mutable_data(DataType::kFloat16);
      Tensor one = MakeTensor<float>({5}, {1, 2, 3, 4, 5});
      // fp16 of 1..5 is exact: build it by adding 0 and each value.
      std::memset(t.raw_data(), 0, t.nbytes());
      const uint16_t halves[5] = {0x3C00, 0x4000, 0x4200, 0x4400, 0x4500};  // 1, 2, 3, 4, 5
      std::memcpy(t.raw_data(), halves, sizeof(halves));
      if (absl::Status s = c->AllReduce(&t, "h"); !s.ok()) return s;
      const uint16_t want[5] = {0x4200, 0x4600, 0x4880, 0x4A00, 0x4B80};  // 3, 6, 9, 12, 15
      if (std::memcmp(t.raw_data(), want, sizeof(want)) != 0) return absl::InternalError("fp16 sum differs");
      return absl::OkStatus();
    });
    for (const auto& s : status) EXPECT_TRUE(s.ok()) << s;
  }
}

// Programs that disagree on a gradient's size: an error naming the variable
// and both ranks, on the rank that sees it, and an error (never a hang, never
// a wrong sum) on every other.
TEST(CollectiveTest, DisagreeingProgramsFailNamingTheVariableAndBothRanks) {
  for (Backend b : {Backend::kRing, Backend::kInProcess}) {
    auto status = OnRanks(b, 2, [](int r, Collective* c) -> absl::Status {
      Tensor t = Values<float>(r, r == 0 ? 1000 : 999);
      return c->AllReduce(&t, "fc_0.w_0@GRAD");
    }, absl::Seconds(5));
    bool named = false;
    for (const auto& s : status) {
      EXPECT_FALSE(s.ok());
      named |= s.message().find("fc_0.w_0@GRAD") != std::string::npos && s.message().find("rank 0") != std::string::npos &&
               s.message().find("rank 1") != std::string::npos;
    }
    EXPECT_TRUE(named) << status[0] << " / " << status[1];
  }
}

// A rank whose process dies: its neighbours fail at once, naming it.
TEST(CollectiveTest, APeerThatDiesFailsItsNeighboursNamingIt) {
  auto status = OnRanks(Backend::kRing, 3, [](int r, Collective* c) -> absl::Status {
    Tensor t = Values<float>(r, 200000);
    if (r == 2) return absl::AbortedError("rank 2 leaves");  // its ring is destroyed: connections close
    return c->AllReduce(&t, "g");
  }, absl::Seconds(20));
  // Rank 0 reads from rank 2; rank 1 then sees rank 0 give up.
  EXPECT_FALSE(status[1].ok());
  EXPECT_NE(status[0].message().find("rank 2"), std::string::npos) << status[0];
  EXPECT_NE(status[0].message().find("closed the connection"), std::string::npos) << status[0];
}

// A rank that never calls: the others give up at the deadline, naming the
// silent neighbour.
TEST(CollectiveTest, APeerThatNeverAnswersTimesOutNamingIt) {
  for (Backend b : {Backend::kRing, Backend::kInProcess}) {
    absl::Notification done;
    auto status = OnRanks(b, 2, [&](int r, Collective* c) -> absl::Status {
      if (r == 1) {
        done.WaitForNotification();  // silent until rank 0 gave up
        return absl::OkStatus();
      }
      Tensor t = Values<float>(r, 10);
      absl::Status s = c->AllReduce(&t, "g");
      done.Notify();
      return s;
    }, absl::Milliseconds(500));
    EXPECT_EQ(status[0].code(), absl::StatusCode::kDeadlineExceeded) << status[0];
    EXPECT_NE(status[0].message().find("rank 1"), std::string::npos) << status[0];
  }
}

TEST(CollectiveTest, ARingRefusesAnotherJobsToken) {
  std::vector<std::string> eps = {FreeEndpoint(), FreeEndpoint()};
  absl::Status s0, s1;
  std::thread t0([&] { s0 = TcpRing::Create({.rank = 0, .endpoints = eps, .token = "job-a", .timeout = absl::Seconds(2)}).status(); });
  std::thread t1([&] { s1 = TcpRing::Create({.rank = 1, .endpoints = eps, .token = "job-b", .timeout = absl::Seconds(2)}).status(); });
  t0.join();
  t1.join();
  EXPECT_FALSE(s0.ok());
  EXPECT_FALSE(s1.ok());
  EXPECT_TRUE(s0.message().find("refused") != std::string::npos || s1.message().find("refused") != std::string::npos)
      << s0 << " / " << s1;
}

TEST(ReduceTest, SumsTheDtypesThatAddAndRefusesTheOthers) {
  float a[3] = {1, 2, 3}, b[3] = {0.5f, 0.25f, 4};
  ASSERT_TRUE(SumInto(DataType::kFloat32, a, b, 3).ok());
  EXPECT_EQ(a[2], 7.0f);
  bool x[1] = {true};
  EXPECT_EQ(SumInto(DataType::kBool, x, x, 1).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace oar
