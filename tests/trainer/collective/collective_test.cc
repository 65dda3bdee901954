// The Collective backends, N ranks as threads of this process: the TCP ring
// over loopback (real sockets), shared memory joined over that ring (with
// its default slots, and with slots small enough that every operation takes
// many rounds of both all-reduce paths), and the in-process group. All-reduce against
// a plain sum for 1-5 ranks, fp32/fp64/int64, sizes 0, 1, n-1, n+1 (not
// divisible), a size past the small-tensor path, and 64 MiB on the ring;
// broadcast, variable-size all-gather and barrier; and the failures:
// disagreeing programs, a peer that dies, a peer that never answers, a
// stranger's token. What only shared memory does: shm_collective_test.cc.
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/trainer/collective/ranks.h"
#include "tests/util/listen_socket.h"
#include "trainer/collective/reduce.h"
#include "trainer/collective/tcp_ring.h"

namespace oar {
namespace {

using testing::Backend;
using testing::BackendName;
using testing::CheckAllReduce;
using testing::MakeRing;
using testing::OnRanks;
using testing::Values;

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

INSTANTIATE_TEST_SUITE_P(
    Ranks, CollectiveTest,
    ::testing::Combine(::testing::Values(Backend::kRing, Backend::kInProcess, Backend::kShm, Backend::kShmSmallSlots),
                       ::testing::Values(1, 2, 3, 4, 5)),
    [](const auto& info) { return absl::StrCat(BackendName(std::get<0>(info.param)), std::get<1>(info.param)); });

TEST(CollectiveTest, RingAllReducesSixtyFourMiB) {
  for (int n : {2, 4}) CheckAllReduce<float>(Backend::kRing, n, int64_t{16} << 20);
}

TEST(CollectiveTest, Fp16AddsOnEveryBackend) {
  for (Backend b : {Backend::kRing, Backend::kInProcess, Backend::kShm}) {
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
  for (Backend b : {Backend::kRing, Backend::kInProcess, Backend::kShm}) {
    auto status = OnRanks(
        b, 2,
        [](int r, Collective* c) -> absl::Status {
          Tensor t = Values<float>(r, r == 0 ? 1000 : 999);
          return c->AllReduce(&t, "fc_0.w_0@GRAD");
        },
        absl::Seconds(5));
    bool named = false;
    for (const auto& s : status) {
      EXPECT_FALSE(s.ok());
      named |= s.message().find("fc_0.w_0@GRAD") != std::string::npos &&
               s.message().find("rank 0") != std::string::npos && s.message().find("rank 1") != std::string::npos;
    }
    EXPECT_TRUE(named) << status[0] << " / " << status[1];
  }
}

// A rank whose process dies: its neighbours fail at once, naming it.
TEST(CollectiveTest, APeerThatDiesFailsItsNeighboursNamingIt) {
  auto status = OnRanks(
      Backend::kRing, 3,
      [](int r, Collective* c) -> absl::Status {
        Tensor t = Values<float>(r, 200000);
        if (r == 2) return absl::AbortedError("rank 2 leaves");  // its ring is destroyed: connections close
        return c->AllReduce(&t, "g");
      },
      absl::Seconds(20));
  // Rank 0 reads from rank 2; rank 1 then sees rank 0 give up.
  EXPECT_FALSE(status[1].ok());
  EXPECT_NE(status[0].message().find("rank 2"), std::string::npos) << status[0];
  EXPECT_NE(status[0].message().find("closed the connection"), std::string::npos) << status[0];
}

// A rank that never calls: the others give up at the deadline, naming the
// silent neighbour.
TEST(CollectiveTest, APeerThatNeverAnswersTimesOutNamingIt) {
  for (Backend b : {Backend::kRing, Backend::kInProcess, Backend::kShm}) {
    absl::Notification done;
    auto status = OnRanks(
        b, 2,
        [&](int r, Collective* c) -> absl::Status {
          if (r == 1) {
            done.WaitForNotification();  // silent until rank 0 gave up
            return absl::OkStatus();
          }
          Tensor t = Values<float>(r, 10);
          absl::Status s = c->AllReduce(&t, "g");
          done.Notify();
          return s;
        },
        absl::Milliseconds(500));
    EXPECT_EQ(status[0].code(), absl::StatusCode::kDeadlineExceeded) << status[0];
    EXPECT_NE(status[0].message().find("rank 1"), std::string::npos) << status[0];
  }
}

TEST(CollectiveTest, ARingRefusesAnotherJobsToken) {
  std::vector<std::string> eps = {ReservedEndpoint(), ReservedEndpoint()};
  absl::Status s0, s1;
  std::thread t0([&] {
    s0 = TcpRing::Create({.rank = 0, .endpoints = eps, .token = "job-a", .timeout = absl::Seconds(2)}).status();
  });
  std::thread t1([&] {
    s1 = TcpRing::Create({.rank = 1, .endpoints = eps, .token = "job-b", .timeout = absl::Seconds(2)}).status();
  });
  t0.join();
  t1.join();
  EXPECT_FALSE(s0.ok());
  EXPECT_FALSE(s1.ok());
  EXPECT_TRUE(s0.message().find("refused") != std::string::npos || s1.message().find("refused") != std::string::npos)
      << s0 << " / " << s1;
  EXPECT_TRUE(s0.message().find("another job (its token differs)") != std::string::npos ||
              s1.message().find("another job (its token differs)") != std::string::npos)
      << s0 << " / " << s1;
}

// Two trainers that count different ring sizes (PADDLE_TRAINERS_NUM): the
// refused one hears both sizes at once, and the refusing one's timeout
// says whom it refused and why.
TEST(CollectiveTest, ARingRefusesARankThatCountsAnotherSizeAndSaysSo) {
  std::vector<std::string> three = {ReservedEndpoint(), ReservedEndpoint(), ReservedEndpoint()};
  std::vector<std::string> two = {three[0], three[1]};
  absl::Status s0, s1;
  std::thread t0([&] {
    s0 = TcpRing::Create({.rank = 0, .endpoints = two, .token = "job", .timeout = absl::Seconds(1)}).status();
  });
  std::thread t1([&] {
    s1 = TcpRing::Create({.rank = 1, .endpoints = three, .token = "job", .timeout = absl::Seconds(1)}).status();
  });
  t0.join();
  t1.join();
  EXPECT_NE(s0.message().find(absl::StrCat("rank 1 (", three[1],
                                           ") refused this rank: its ring has 3 ranks, this one 2; "
                                           "start every trainer with the same PADDLE_TRAINERS_NUM")),
            std::string::npos)
      << s0;
  EXPECT_NE(s1.message().find("it refused a rank 0 whose ring has 2 ranks, not 3 (PADDLE_TRAINERS_NUM differs)"),
            std::string::npos)
      << s1;
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
