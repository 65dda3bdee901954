// TaskQueue against a real etcd-server on loopback: members share an
// epoch's chunks so each is trained once; a dead member's chunk is handed
// out again and its late report refused.
#include "common/elastic/task_queue.h"

#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/util/etcd_server.h"
#include "tests/util/need_tool.h"

namespace oar::elastic {
namespace {

class TaskQueueTest : public EtcdTest {
 protected:
  int64_t Lease(absl::Duration ttl) {
    auto l = etcd_->GrantLease(ttl);
    EXPECT_TRUE(l.ok()) << l.status();
    return l.ok() ? *l : 0;
  }
};

TEST_F(TaskQueueTest, MembersTrainEveryChunkOfAnEpochExactlyOnce) {
  constexpr int kChunks = 24;
  absl::Mutex mu;
  std::multiset<int64_t> trained;
  std::map<int64_t, std::string> by;
  std::atomic<int64_t> requeued{0};
  std::vector<std::thread> members;
  for (int m = 0; m < 3; ++m) {
    members.emplace_back([&, m] {
      const std::string name = "trainer/" + std::to_string(m);
      TaskQueue q(etcd_.get(), "job1", name, Lease(absl::Seconds(30)));
      ASSERT_TRUE(q.Open(0, kChunks).ok());
      while (true) {
        auto c = q.Next(0, absl::Seconds(20));
        ASSERT_TRUE(c.ok()) << c.status();
        if (!c->has_value()) {
          requeued += q.requeued();
          return;
        }
        {
          absl::MutexLock l(&mu);
          trained.insert(**c);
          by[**c] = name;
        }
        ASSERT_TRUE(q.Done(0, **c).ok());
      }
    });
  }
  for (auto& t : members) t.join();
  ASSERT_EQ(trained.size(), static_cast<size_t>(kChunks));
  EXPECT_EQ(requeued.load(), 0);  // nobody left a chunk unfinished
  for (int c = 0; c < kChunks; ++c) EXPECT_EQ(trained.count(c), 1u) << "chunk " << c;
  TaskQueue reader(etcd_.get(), "job1", "reader", 0);
  auto p = reader.Progress(0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->finished());
  EXPECT_EQ(p->done, by);  // who trained which, as etcd kept it
  EXPECT_TRUE(p->claimed.empty());
}

TEST_F(TaskQueueTest, ADeadMembersChunkIsHandedOutAgainAndItsLateReportRefused) {
  TaskQueue dying(etcd_.get(), "job1", "trainer/0", Lease(absl::Seconds(2)));  // never renewed
  TaskQueue alive(etcd_.get(), "job1", "trainer/1", Lease(absl::Seconds(60)));
  ASSERT_TRUE(dying.Open(0, 2).ok());
  ASSERT_TRUE(alive.Open(0, 2).ok());
  auto c0 = dying.Take(0);
  ASSERT_TRUE(c0.ok() && c0->has_value());
  EXPECT_EQ(**c0, 0);
  auto c1 = alive.Next(0, absl::Seconds(5));
  ASSERT_TRUE(c1.ok() && c1->has_value());
  EXPECT_EQ(**c1, 1);
  ASSERT_TRUE(alive.Done(0, 1).ok());
  // Chunk 0 is trainer/0's until its lease runs out; then it comes back.
  const absl::Time asked = absl::Now();
  auto again = alive.Next(0, absl::Seconds(15));
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE(again->has_value());
  EXPECT_EQ(**again, 0);
  EXPECT_GT(absl::Now() - asked, absl::Milliseconds(500));
  EXPECT_EQ(alive.requeued(), 1);  // chunk 0, which trainer/0 left unfinished
  EXPECT_EQ(dying.requeued(), 0);
  const absl::Status late = dying.Done(0, 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(late)) << late;
  EXPECT_NE(late.message().find("trainer/0"), std::string::npos) << late;
  ASSERT_TRUE(alive.Done(0, 0).ok());
  auto p = alive.Progress(0);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->finished());
  EXPECT_EQ(p->done, (std::map<int64_t, std::string>{{0, "trainer/1"}, {1, "trainer/1"}}));
  auto none = alive.Next(0, absl::Seconds(1));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_F(TaskQueueTest, AMemberThatCutsTheDataDifferentlyIsRefusedNamingTheFirst) {
  TaskQueue a(etcd_.get(), "job1", "trainer/0", 0), b(etcd_.get(), "job1", "trainer/1", 0);
  ASSERT_TRUE(a.Open(3, 8).ok());
  ASSERT_TRUE(b.Open(3, 8).ok());
  const absl::Status s = b.Open(4, 8).ok() ? a.Open(4, 9) : absl::OkStatus();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("trainer/1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("9 chunks"), std::string::npos) << s;
}

TEST_F(TaskQueueTest, WaitingForChunksOthersHoldIsBoundedAndNamesThem) {
  TaskQueue a(etcd_.get(), "job1", "trainer/0", Lease(absl::Seconds(60)));
  TaskQueue b(etcd_.get(), "job1", "trainer/1", Lease(absl::Seconds(60)));
  ASSERT_TRUE(a.Open(0, 1).ok());
  ASSERT_TRUE(a.Take(0).ok());
  auto c = b.Next(0, absl::Milliseconds(500));
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("trainer/0 (chunk 0)"), std::string::npos) << c.status();
}

}  // namespace
}  // namespace oar::elastic
