// Membership against a real etcd-server on loopback: members see each other
// join and leave, a member cut off for longer than its lease is removed
// (and only it), and an etcd restarted without its data gets every member
// back as they register again.
#include "common/elastic/membership.h"

#include <set>

#include "gtest/gtest.h"
#include "tests/util/etcd_server.h"
#include "tests/util/need_tool.h"

namespace oar::elastic {
namespace {

constexpr absl::Duration kTtl = absl::Seconds(2);

class MembershipTest : public EtcdTest {
 protected:
  void SetUp() override {
    EtcdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (int i = 0; i < 3; ++i) {
      auto c = EtcdClient::Connect(server_->url(), absl::Seconds(5));
      ASSERT_TRUE(c.ok()) << c.status();
      clients_.push_back(std::move(*c));
    }
  }
  std::unique_ptr<Membership> JoinAs(int i) {
    auto m = Membership::Join(clients_[i].get(), {.job = "job1",
                                                  .name = "trainer/" + std::to_string(i),
                                                  .value = "127.0.0.1:" + std::to_string(7000 + i),
                                                  .ttl = kTtl});
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(*m) : nullptr;
  }
  static auto Count(size_t n) {
    return [n](const Members& m) { return m.size() == n; };
  }
  std::vector<std::unique_ptr<EtcdClient>> clients_;
};

TEST_F(MembershipTest, MembersSeeEachOtherJoinAndLeave) {
  auto a = JoinAs(0), b = JoinAs(1), c = JoinAs(2);
  ASSERT_TRUE(a && b && c);
  ASSERT_TRUE(a->WaitFor(Count(3), absl::Seconds(10))) << a->members().size();
  EXPECT_EQ(a->members().at("trainer/2"), "127.0.0.1:7002");
  ASSERT_TRUE(c->WaitFor(Count(3), absl::Seconds(10)));
  ASSERT_TRUE(b->Leave().ok());
  ASSERT_TRUE(a->WaitFor(Count(2), absl::Seconds(10)));
  ASSERT_TRUE(c->WaitFor(Count(2), absl::Seconds(10)));
  EXPECT_EQ(a->members().count("trainer/1"), 0u);
  EXPECT_EQ(a->changes(), 4);  // three joins seen (its own included), one leave
  EXPECT_EQ(a->ever(), (std::set<std::string>{"trainer/0", "trainer/1", "trainer/2"}));
}

TEST_F(MembershipTest, AwaitChangeWakesOnAJoinOrLeaveAndTimesOutWithoutOne) {
  auto a = JoinAs(0);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->WaitFor(Count(1), absl::Seconds(10)));
  int64_t seen = a->changes();
  EXPECT_FALSE(a->AwaitChange(seen, absl::Milliseconds(50)));  // nobody came or went
  auto b = JoinAs(1);
  ASSERT_TRUE(b);
  ASSERT_TRUE(a->AwaitChange(seen, absl::Seconds(10)));
  EXPECT_EQ(a->members().count("trainer/1"), 1u);
  seen = a->changes();
  ASSERT_TRUE(b->Leave().ok());
  ASSERT_TRUE(a->AwaitChange(seen, absl::Seconds(10)));
  EXPECT_EQ(a->members().count("trainer/1"), 0u);
}

TEST_F(MembershipTest, ANameALiveMemberHoldsIsRefused) {
  auto a = JoinAs(0);
  ASSERT_TRUE(a);
  auto again = Membership::Join(clients_[1].get(), {.job = "job1", .name = "trainer/0", .value = "x", .ttl = kTtl});
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  EXPECT_NE(again.status().message().find("127.0.0.1:7000"), std::string::npos) << again.status();
}

// What a pserver does to a trainer its step waited on, silent, for a whole
// lease: it ends that member's entry, and only if it is still the process
// meant. A live member so ended registers again (it is told it left when
// it next speaks to the job).
TEST_F(MembershipTest, RevokeIfEndsAnotherMembersEntryOnlyWhenItIsStillTheProcessMeant) {
  auto a = JoinAs(0), b = JoinAs(1);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->WaitFor(Count(2), absl::Seconds(10)));
  auto is = [](const std::string& want) { return [want](const std::string& v) { return v == want; }; };
  absl::StatusOr<bool> r = Membership::RevokeIf(clients_[2].get(), "job1", "trainer/1", is("127.0.0.1:9999"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);  // another process's entry: left alone
  r = Membership::RevokeIf(clients_[2].get(), "job1", "trainer/7", is("127.0.0.1:7001"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);  // no such member
  EXPECT_EQ(a->members().size(), 2u);
  const int64_t seen = a->changes();
  r = Membership::RevokeIf(clients_[2].get(), "job1", "trainer/1", is("127.0.0.1:7001"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  // b lost its lease (it registers again), and a saw its entry go and come.
  for (absl::Time until = absl::Now() + absl::Seconds(10); b->reregistrations() == 0 && absl::Now() < until;) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(b->reregistrations(), 1);
  for (absl::Time until = absl::Now() + absl::Seconds(10); a->changes() < seen + 2 && absl::Now() < until;) {
    a->AwaitChange(a->changes(), absl::Milliseconds(100));
  }
  EXPECT_EQ(a->changes(), seen + 2);
  EXPECT_EQ(a->members().size(), 2u);
}

TEST_F(MembershipTest, AMemberCutOffLongerThanItsLeaseIsRemovedAndOnlyIt) {
  auto a = JoinAs(0), b = JoinAs(1), c = JoinAs(2);
  ASSERT_TRUE(a && b && c);
  ASSERT_TRUE(a->WaitFor(Count(3), absl::Seconds(10)));
  const absl::Time cut = absl::Now();
  b->StopRenewing();
  ASSERT_TRUE(a->WaitFor(Count(2), absl::Seconds(10)));
  const absl::Duration gone_after = absl::Now() - cut;
  EXPECT_EQ(a->members().count("trainer/1"), 0u);
  EXPECT_EQ(a->members().count("trainer/2"), 1u);
  EXPECT_GE(gone_after, kTtl - absl::Milliseconds(700));  // not before its lease could have run out
  // The others stay past several of their own TTLs.
  absl::SleepFor(2 * kTtl);
  EXPECT_EQ(c->members().size(), 2u);
  EXPECT_EQ(a->reregistrations(), 0);
}

TEST_F(MembershipTest, MembersRegisterAgainWhenEtcdRestartsWithoutItsData) {
  auto a = JoinAs(0), b = JoinAs(1);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->WaitFor(Count(2), absl::Seconds(10)));
  ASSERT_TRUE(server_->Restart(/*wipe=*/true).ok());
  // Each finds its lease gone, registers again, and both views list both.
  ASSERT_TRUE(a->WaitFor(Count(2), absl::Seconds(20)) && b->WaitFor(Count(2), absl::Seconds(20)));
  for (int i = 0; i < 100 && (a->reregistrations() == 0 || b->reregistrations() == 0); ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(a->reregistrations(), 1);
  EXPECT_EQ(b->reregistrations(), 1);
  auto listed = clients_[2]->GetPrefix(Membership::Prefix("job1"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->kvs.size(), 2u);
  // And the watches run again: a leave is seen.
  ASSERT_TRUE(b->Leave().ok());
  EXPECT_TRUE(a->WaitFor(Count(1), absl::Seconds(10)));
}

TEST_F(MembershipTest, MembersKeepTheirLeasesThroughAnEtcdRestartWithItsData) {
  auto a = JoinAs(0), b = JoinAs(1);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->WaitFor(Count(2), absl::Seconds(10)));
  ASSERT_TRUE(server_->Restart().ok());
  absl::SleepFor(2 * kTtl);
  EXPECT_EQ(a->members().size(), 2u);
  EXPECT_EQ(a->reregistrations() + b->reregistrations(), 0);
  ASSERT_TRUE(b->Leave().ok());
  EXPECT_TRUE(a->WaitFor(Count(1), absl::Seconds(10)));
}

}  // namespace
}  // namespace oar::elastic
