// EtcdClient against a real etcd-server on loopback (tests/util/etcd_server.h).
#include "common/elastic/etcd_client.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/util/etcd_server.h"
#include "tests/util/need_tool.h"

namespace oar::elastic {
namespace {

using EtcdClientTest = EtcdTest;

TEST_F(EtcdClientTest, PutsReadsAndDeletesKeysAndPrefixes) {
  auto r1 = etcd_->Put("/j/a/1", "x");
  ASSERT_TRUE(r1.ok()) << r1.status();
  auto r2 = etcd_->Put("/j/a/2", "y");
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_GT(*r2, *r1);
  ASSERT_TRUE(etcd_->Put("/j/b/1", "z").ok());
  auto a = etcd_->GetPrefix("/j/a/");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->kvs.size(), 2u);
  EXPECT_EQ(a->kvs[0].key, "/j/a/1");
  EXPECT_EQ(a->kvs[0].value, "x");
  EXPECT_EQ(a->kvs[1].value, "y");
  EXPECT_GE(a->revision, *r2);
  auto one = etcd_->Get("/j/b/1");
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->kvs.size(), 1u);
  EXPECT_EQ(one->kvs[0].value, "z");
  EXPECT_EQ(*etcd_->DeletePrefix("/j/a/"), 2);
  EXPECT_TRUE(etcd_->GetPrefix("/j/a/")->kvs.empty());
  EXPECT_EQ(*etcd_->Delete("/j/b/1"), 1);
  EXPECT_EQ(*etcd_->Delete("/j/b/1"), 0);
}

TEST_F(EtcdClientTest, CreateTakesAKeyOnceAndCompareAndPutRefusesAStaleRevision) {
  auto first = etcd_->Create("/j/task/0", "trainer/1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first);
  EXPECT_FALSE(*etcd_->Create("/j/task/0", "trainer/2"));
  auto held = etcd_->Get("/j/task/0");
  ASSERT_EQ(held->kvs.size(), 1u);
  EXPECT_EQ(held->kvs[0].value, "trainer/1");
  const int64_t rev = held->kvs[0].mod_revision;
  EXPECT_TRUE(*etcd_->CompareAndPut("/j/task/0", rev, "done"));
  EXPECT_FALSE(*etcd_->CompareAndPut("/j/task/0", rev, "trainer/2"));
  EXPECT_EQ(etcd_->Get("/j/task/0")->kvs[0].value, "done");
}

TEST_F(EtcdClientTest, AKeyGoesWithItsLeaseRevokedOrExpired) {
  auto lease = etcd_->GrantLease(absl::Seconds(2));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(etcd_->Put("/j/m/1", "a", *lease).ok());
  EXPECT_EQ(etcd_->Get("/j/m/1")->kvs.at(0).lease, *lease);
  // Renewed past its TTL, it stays.
  for (int i = 0; i < 4; ++i) {
    absl::SleepFor(absl::Milliseconds(700));
    ASSERT_TRUE(etcd_->KeepAlive(*lease).ok());
  }
  EXPECT_EQ(etcd_->Get("/j/m/1")->kvs.size(), 1u);
  // Unrenewed, it expires (etcd checks leases every 500 ms).
  absl::SleepFor(absl::Milliseconds(3500));
  EXPECT_TRUE(etcd_->Get("/j/m/1")->kvs.empty());
  EXPECT_TRUE(absl::IsNotFound(etcd_->KeepAlive(*lease)));
  auto other = etcd_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(etcd_->Put("/j/m/2", "b", *other).ok());
  ASSERT_TRUE(etcd_->RevokeLease(*other).ok());
  EXPECT_TRUE(etcd_->Get("/j/m/2")->kvs.empty());
}

TEST_F(EtcdClientTest, AWatchSeesEveryPutAndDeleteUnderItsPrefixInOrder) {
  auto start = etcd_->Put("/j/other", "before");
  ASSERT_TRUE(start.ok());
  absl::Mutex mu;
  std::vector<std::string> seen;
  auto watch = etcd_->WatchPrefix(
      "/j/w/", *start + 1,
      [&](const std::vector<EtcdEvent>& events, int64_t) {
        absl::MutexLock l(&mu);
        for (const auto& e : events) seen.push_back((e.deleted ? "-" : "+") + e.kv.key + "=" + e.kv.value);
      },
      nullptr);
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(etcd_->Put("/j/w/1", "a").ok());
  ASSERT_TRUE(etcd_->Put("/j/x", "outside").ok());
  ASSERT_TRUE(etcd_->Put("/j/w/2", "b").ok());
  ASSERT_TRUE(etcd_->Delete("/j/w/1").ok());
  absl::MutexLock l(&mu);
  auto four = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return seen.size() >= 3; };
  ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&four), absl::Seconds(10)));
  EXPECT_EQ(seen, (std::vector<std::string>{"+/j/w/1=a", "+/j/w/2=b", "-/j/w/1="}));
}

TEST(EtcdClientErrorsTest, ABadUrlAndAnUnreachableServerAreErrorsNamingThem) {
  auto bad = EtcdClient::Connect("http://127.0.0.1:2379", absl::Seconds(1));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("etcd://HOST:PORT"), std::string::npos) << bad.status();
  auto c = EtcdClient::Connect("etcd://127.0.0.1:1", absl::Milliseconds(300));
  ASSERT_TRUE(c.ok());
  const absl::Status s = (*c)->Put("/k", "v").status();
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find("127.0.0.1:1"), std::string::npos) << s;
}

}  // namespace
}  // namespace oar::elastic
