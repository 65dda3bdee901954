// The Collective backends, N ranks as threads of this process: the TCP ring
// over loopback (real sockets), shared memory joined over that ring (with
// its default slots, and with slots small enough that every operation takes
// many rounds of both all-reduce paths), and the in-process group. All-reduce against
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
#include "trainer/collective/shm_collective.h"
#include "trainer/collective/tcp_ring.h"

namespace oar {
namespace {

enum class Backend { kRing, kInProcess, kShm, kShmSmallSlots };

std::string BackendName(Backend b) {
  switch (b) {
    case Backend::kRing: return "Ring";
    case Backend::kInProcess: return "InProcess";
    case Backend::kShm: return "Shm";
    case Backend::kShmSmallSlots: return "ShmSmallSlots";
  }
  return "?";
}

bool OverRing(Backend b) { return b != Backend::kInProcess; }

// Makes an n-rank ring on fresh loopback ports, one thread per rank. Tests
// run side by side (ctest -j) and a port found free may be taken by another
// test's ring before this one listens on it: a rank then cannot listen, or
// meets a stranger's ring (refused by the handshake). Those collisions of
// the test harness are retried on new ports, up to 3 times; any other
// error is each rank's status.
std::vector<absl::StatusOr<std::unique_ptr<TcpRing>>> MakeRing(int n, absl::Duration timeout, const std::string& token,
                                                               std::vector<std::string>* endpoints = nullptr) {
  std::vector<absl::StatusOr<std::unique_ptr<TcpRing>>> rings;
  std::vector<std::string> eps;
  for (int attempt = 0; attempt < 3; ++attempt) {
    eps.clear();
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
  if (endpoints != nullptr) *endpoints = eps;
  return rings;
}

// Runs fn(rank, collective) on n threads; returns each rank's status.
std::vector<absl::Status> OnRanks(Backend backend, int n, const std::function<absl::Status(int, Collective*)>& fn,
                                  absl::Duration timeout = absl::Seconds(30), const std::string& token = "job") {
  InProcessGroup group(n, timeout);
  std::vector<absl::StatusOr<std::unique_ptr<TcpRing>>> rings;
  std::vector<std::string> eps;
  if (OverRing(backend)) rings = MakeRing(n, timeout, token, &eps);
  std::vector<absl::Status> status(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Collective> c;
      if (OverRing(backend)) {
        if (!rings[r].ok()) {
          status[r] = rings[r].status();
          return;
        }
        c = *std::move(rings[r]);
      } else {
        c = group.Rank(r);
      }
      if (backend == Backend::kShm || backend == Backend::kShmSmallSlots) {
        ShmJoinOptions o{.transport = "shm", .timeout = timeout};
        if (backend == Backend::kShmSmallSlots) o.slot_bytes = 24 << 10;  // 100003 floats: 17 rounds, both paths
        auto shm = JoinOverSharedMemory(std::unique_ptr<TcpRing>(static_cast<TcpRing*>(c.release())), eps, o);
        if (!shm.ok()) {
          status[r] = shm.status();
          return;
        }
        if (n > 1 && (*shm)->backend() != "shm") {
          status[r] = absl::InternalError("joined over " + (*shm)->backend());
          return;
        }
        c = *std::move(shm);
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
                         ::testing::Combine(::testing::Values(Backend::kRing, Backend::kInProcess, Backend::kShm,
                                                              Backend::kShmSmallSlots),
                                            ::testing::Values(1, 2, 3, 4, 5)),
                         [](const auto& info) {
                           return absl::StrCat(BackendName(std::get<0>(info.param)), std::get<1>(info.param));
                         });

TEST(CollectiveTest, RingAllReducesSixtyFourMiB) {
  for (int n : {2, 4}) CheckAllReduce<float>(Backend::kRing, n, int64_t{16} << 20);
}

TEST(CollectiveTest, SharedMemoryAllReducesSixtyFourMiB) {
  for (int n : {2, 4}) CheckAllReduce<float>(Backend::kShm, n, int64_t{16} << 20);
}

// A bucket (tensors of odd sizes, some across a round's edge, one empty)
// through shared memory equals the all-reduce of its concatenation; the
// ring leaves buckets to the caller's packing.
TEST(CollectiveTest, SharedMemoryBucketsEqualTheAllReduceOfTheirConcatenation) {
  for (Backend b : {Backend::kShm, Backend::kShmSmallSlots}) {
    const std::vector<int64_t> sizes = {7, 0, 6000, 1, 20011, 3};
    auto status = OnRanks(b, 3, [&](int r, Collective* c) -> absl::Status {
      int64_t total = 0;
      for (int64_t n : sizes) total += n;
      Tensor whole = Values<float>(r, total);
      const std::vector<float> all = TensorToVector<float>(whole);
      std::vector<Tensor> parts;
      int64_t at = 0;
      for (int64_t n : sizes) {
        parts.push_back(MakeTensor<float>({n}, std::vector<float>(all.begin() + at, all.begin() + at + n)));
        at += n;
      }
      std::vector<Tensor*> bucket;
      for (Tensor& t : parts) bucket.push_back(&t);
      if (absl::Status s = c->AllReduceBucket(bucket, "bucket(g)"); !s.ok()) return s;
      if (absl::Status s = c->AllReduce(&whole, "bucket(g)"); !s.ok()) return s;
      std::vector<float> joined;
      for (const Tensor& t : parts) {
        const std::vector<float> v = TensorToVector<float>(t);
        joined.insert(joined.end(), v.begin(), v.end());
      }
      if (joined != TensorToVector<float>(whole)) return absl::InternalError(absl::StrCat("rank ", r, ": bucket differs"));
      return absl::OkStatus();
    });
    for (const auto& s : status) EXPECT_TRUE(s.ok()) << BackendName(b) << ": " << s;
  }
  auto ring = OnRanks(Backend::kRing, 2, [](int r, Collective* c) -> absl::Status {
    Tensor t = Values<float>(r, 10);
    return c->AllReduceBucket({&t}, "bucket(g)");
  });
  for (const auto& s : ring) EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
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

// Shared memory: a rank whose communicator is destroyed (its process ends
// with the job unfinished) fails the ranks waiting for it at once, naming
// it, well before the deadline; and so every later call.
TEST(CollectiveTest, SharedMemoryPeerThatLeavesFailsTheOthersAtOnceNamingIt) {
  const absl::Time start = absl::Now();
  auto status = OnRanks(Backend::kShm, 3, [](int r, Collective* c) -> absl::Status {
    Tensor t = Values<float>(r, 200000);
    if (r == 2) return absl::AbortedError("rank 2 leaves");
    absl::Status s = c->AllReduce(&t, "g");
    if (s.ok()) return absl::InternalError("the all-reduce finished without rank 2");
    if (c->Barrier().ok()) return absl::InternalError("a broken communicator went on");
    return s;
  }, absl::Seconds(20));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (int r : {0, 1}) {
    EXPECT_NE(status[r].message().find("rank 2 ("), std::string::npos) << status[r];
    EXPECT_NE(status[r].message().find("left the job"), std::string::npos) << status[r];
  }
}

// Shared memory: a rank's own bad call (a root that is no rank) fails it and
// tells the others at once, instead of leaving them to their deadline.
TEST(CollectiveTest, SharedMemoryLocalErrorEndsThePeersWaitAtOnce) {
  const absl::Time start = absl::Now();
  auto status = OnRanks(Backend::kShm, 2, [](int r, Collective* c) -> absl::Status {
    Tensor t = Values<float>(r, 100);
    return c->Broadcast(&t, r == 0 ? 5 : 0, "w");
  }, absl::Seconds(20));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_NE(status[0].message().find("root 5 is not a rank"), std::string::npos) << status[0];
  EXPECT_NE(status[1].message().find("rank 0 ("), std::string::npos) << status[1];
  EXPECT_NE(status[1].message().find("root 5 is not a rank"), std::string::npos) << status[1];
}

// Every rank must agree to join over shared memory: one told tcp keeps the
// whole job on the ring (and it works); a rank that requires shared memory
// there fails, saying why.
TEST(CollectiveTest, SharedMemoryNeedsEveryRankElseTheRingServes) {
  for (const std::string required : {"auto", "shm"}) {
    std::vector<std::string> eps;
    auto rings = MakeRing(3, absl::Seconds(20), "job", &eps);
    std::vector<absl::Status> status(3);
    std::vector<std::string> backends(3);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] {
        if (!rings[r].ok()) {
          status[r] = rings[r].status();
          return;
        }
        const std::string transport = r == 1 ? "tcp" : r == 0 ? required : "auto";
        auto c = JoinOverSharedMemory(*std::move(rings[r]), eps, {.transport = transport, .timeout = absl::Seconds(20)});
        if (!c.ok()) {
          status[r] = c.status();
          return;
        }
        backends[r] = (*c)->backend();
        Tensor t = Values<float>(r, 1000);
        status[r] = (*c)->AllReduce(&t, "g");
      });
    }
    for (auto& t : threads) t.join();
    if (required == "auto") {
      for (int r = 0; r < 3; ++r) {
        EXPECT_TRUE(status[r].ok()) << status[r];
        EXPECT_EQ(backends[r], "tcp-ring");
      }
    } else {
      EXPECT_EQ(status[0].code(), absl::StatusCode::kFailedPrecondition) << status[0];
      EXPECT_NE(status[0].message().find("--collective_transport=tcp"), std::string::npos) << status[0];
      EXPECT_FALSE(status[1].ok() && status[2].ok());  // rank 0 left the ring: the others cannot finish
    }
  }
}

TEST(CollectiveTest, EndpointsShareAHostOnLoopbackOrOneAddress) {
  EXPECT_TRUE(EndpointsShareAHost({"127.0.0.1:6170", "127.0.0.1:6171", "localhost:6172"}));
  EXPECT_TRUE(EndpointsShareAHost({"10.0.0.7:6170", "10.0.0.7:6171"}));
  EXPECT_TRUE(EndpointsShareAHost({"[::1]:6170", "127.0.0.1:6171"}));
  EXPECT_FALSE(EndpointsShareAHost({"10.0.0.7:6170", "10.0.0.8:6170"}));
  EXPECT_FALSE(EndpointsShareAHost({"127.0.0.1:6170", "10.0.0.8:6170"}));
}

// A rank that never calls: the others give up at the deadline, naming the
// silent neighbour.
TEST(CollectiveTest, APeerThatNeverAnswersTimesOutNamingIt) {
  for (Backend b : {Backend::kRing, Backend::kInProcess, Backend::kShm}) {
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
