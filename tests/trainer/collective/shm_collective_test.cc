// The shared-memory backend (shm_collective.h) beyond what every backend
// passes in collective_test.cc: 64 MiB, buckets moved where they lie, a
// peer that leaves or errs ending the others' waits at once, joining only
// when every rank agrees (else the ring serves), and the same-host check.
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/trainer/collective/ranks.h"
#include "trainer/collective/shm_collective.h"

namespace oar {
namespace {

using testing::Backend;
using testing::BackendName;
using testing::CheckAllReduce;
using testing::MakeRing;
using testing::OnRanks;
using testing::Values;

TEST(ShmCollectiveTest, AllReducesSixtyFourMiB) {
  for (int n : {2, 4}) CheckAllReduce<float>(Backend::kShm, n, int64_t{16} << 20);
}

// A bucket (tensors of odd sizes, some across a round's edge, one empty)
// through shared memory equals the all-reduce of its concatenation; the
// ring leaves buckets to the caller's packing.
TEST(ShmCollectiveTest, BucketsEqualTheAllReduceOfTheirConcatenation) {
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
      if (!c->AllReducesBucketsInPlace()) return absl::InternalError("shared memory should move buckets in place");
      if (absl::Status s = c->AllReduceBucket(bucket, "bucket(g)"); !s.ok()) return s;
      if (absl::Status s = c->AllReduce(&whole, "bucket(g)"); !s.ok()) return s;
      std::vector<float> joined;
      for (const Tensor& t : parts) {
        const std::vector<float> v = TensorToVector<float>(t);
        joined.insert(joined.end(), v.begin(), v.end());
      }
      if (joined != TensorToVector<float>(whole))
        return absl::InternalError(absl::StrCat("rank ", r, ": bucket differs"));
      return absl::OkStatus();
    });
    for (const auto& s : status) EXPECT_TRUE(s.ok()) << BackendName(b) << ": " << s;
  }
  auto ring = OnRanks(Backend::kRing, 2, [](int r, Collective* c) -> absl::Status {
    Tensor t = Values<float>(r, 10);
    if (c->AllReducesBucketsInPlace()) return absl::InternalError("the ring says it moves buckets in place");
    return c->AllReduceBucket({&t}, "bucket(g)");
  });
  for (const auto& s : ring) EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
}

// Shared memory: a rank whose communicator is destroyed (its process ends
// with the job unfinished) fails the ranks waiting for it at once, naming
// it, well before the deadline; and so every later call.
TEST(ShmCollectiveTest, PeerThatLeavesFailsTheOthersAtOnceNamingIt) {
  auto status = OnRanks(
      Backend::kShm, 3,
      [](int r, Collective* c) -> absl::Status {
        Tensor t = Values<float>(r, 200000);
        if (r == 2) return absl::AbortedError("rank 2 leaves");
        absl::Status s = c->AllReduce(&t, "g");
        if (s.ok()) return absl::InternalError("the all-reduce finished without rank 2");
        if (c->Barrier().ok()) return absl::InternalError("a broken communicator went on");
        return s;
      },
      absl::Seconds(20));
  for (int r : {0, 1}) {  // told that rank 2 left, not timed out waiting for it
    EXPECT_FALSE(absl::IsDeadlineExceeded(status[r])) << status[r];
    EXPECT_NE(status[r].message().find("rank 2 ("), std::string::npos) << status[r];
    EXPECT_NE(status[r].message().find("left the job"), std::string::npos) << status[r];
  }
}

// Shared memory: a rank that does not come within the timeout (stuck) is
// named by every other rank's Unanswered() once the wait fails — exactly
// it, whichever rank timed out first; the ring cannot tell (its rank
// waits on its neighbour) and names none.
TEST(ShmCollectiveTest, ARankThatDoesNotComeWithinTheTimeoutIsNamedUnansweredByEveryRank) {
  for (Backend b : {Backend::kShm, Backend::kRing}) {
    auto status = OnRanks(
        b, 4,
        [&](int r, Collective* c) -> absl::Status {
          Tensor t = Values<float>(r, 1000);
          if (absl::Status s = c->AllReduce(&t, "g"); !s.ok()) return s;  // one that every rank comes to
          if (!c->Unanswered().empty()) return absl::InternalError("a rank named unanswered after a good call");
          if (r == 2) {
            absl::SleepFor(absl::Milliseconds(1200));
            return absl::OkStatus();
          }
          absl::Status s = c->AllReduce(&t, "g");
          if (s.ok()) return absl::InternalError("the all-reduce finished without rank 2");
          const std::vector<int> want = b == Backend::kShm ? std::vector<int>{2} : std::vector<int>{};
          if (c->Unanswered() != want) {
            return absl::InternalError(
                absl::StrCat("rank ", r, " names ", absl::StrJoin(c->Unanswered(), ","), " unanswered: ", s.message()));
          }
          return absl::OkStatus();
        },
        absl::Milliseconds(400));
    for (int r = 0; r < 4; ++r) EXPECT_TRUE(status[r].ok()) << BackendName(b) << " rank " << r << ": " << status[r];
  }
}

// Shared memory: a rank's own bad call (a root that is no rank) fails it and
// tells the others at once, instead of leaving them to their deadline.
TEST(ShmCollectiveTest, LocalErrorEndsThePeersWaitAtOnce) {
  auto status = OnRanks(
      Backend::kShm, 2,
      [](int r, Collective* c) -> absl::Status {
        Tensor t = Values<float>(r, 100);
        return c->Broadcast(&t, r == 0 ? 5 : 0, "w");
      },
      absl::Seconds(20));
  EXPECT_FALSE(absl::IsDeadlineExceeded(status[1])) << status[1];  // told at once, not timed out
  EXPECT_NE(status[0].message().find("root 5 is not a rank"), std::string::npos) << status[0];
  EXPECT_NE(status[1].message().find("rank 0 ("), std::string::npos) << status[1];
  EXPECT_NE(status[1].message().find("root 5 is not a rank"), std::string::npos) << status[1];
}

// Every rank must agree to join over shared memory: one told tcp keeps the
// whole job on the ring (and it works); a rank that requires shared memory
// there fails, saying why.
TEST(ShmCollectiveTest, NeedsEveryRankElseTheRingServes) {
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
        auto c =
            JoinOverSharedMemory(*std::move(rings[r]), eps, {.transport = transport, .timeout = absl::Seconds(20)});
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

TEST(ShmCollectiveTest, EndpointsShareAHostOnLoopbackOrOneAddress) {
  EXPECT_TRUE(EndpointsShareAHost({"127.0.0.1:6170", "127.0.0.1:6171", "localhost:6172"}));
  EXPECT_TRUE(EndpointsShareAHost({"10.0.0.7:6170", "10.0.0.7:6171"}));
  EXPECT_TRUE(EndpointsShareAHost({"[::1]:6170", "127.0.0.1:6171"}));
  EXPECT_FALSE(EndpointsShareAHost({"10.0.0.7:6170", "10.0.0.8:6170"}));
  EXPECT_FALSE(EndpointsShareAHost({"127.0.0.1:6170", "10.0.0.8:6170"}));
}

}  // namespace
}  // namespace oar
