// The elastic nccl2 trainers' agreement on each ring, against a real etcd:
// trainers started together get one generation; survivors of a death get
// the next one without it (once it is no longer live); a joiner waits for
// the trainers already training and enters with them; a process on a dead
// trainer's id does not take a generation it never said ready to; too few
// trainers for MIN is named when the wait runs out.
#include "common/elastic/ring_rendezvous.h"

#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/elastic/membership.h"
#include "gtest/gtest.h"
#include "tests/util/etcd_server.h"

namespace oar::elastic {
namespace {

class RingRendezvousTest : public EtcdTest {
 protected:
  RendezvousOptions Trainer(int id, std::string value = "") {
    RendezvousOptions o;
    o.job = "job";
    o.trainer = id;
    o.value = value.empty() ? absl::StrCat("host pid ", 100 + id) : value;
    o.live = [this]() -> absl::StatusOr<std::set<int>> {
      std::lock_guard<std::mutex> l(mu_);
      return live_;
    };
    return o;
  }
  // Trainer `id` registered as Membership registers it (its entry under a
  // 60 s lease, renewed by nobody here): its options read the live
  // trainers from etcd, and put its ready keys under that lease.
  RendezvousOptions Member(int id) {
    RendezvousOptions o = Trainer(id);
    absl::StatusOr<int64_t> lease = etcd_->GrantLease(absl::Seconds(60));
    EXPECT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE(etcd_->Put(absl::StrCat(Membership::Prefix("job"), "trainer/", id), o.value, *lease).ok());
    o.live = nullptr;
    o.lease = [l = *lease] { return l; };
    return o;
  }
  bool Registered(int id) { return !etcd_->Get(absl::StrCat(Membership::Prefix("job"), "trainer/", id))->kvs.empty(); }
  void SetLive(std::set<int> live) {
    std::lock_guard<std::mutex> l(mu_);
    live_ = std::move(live);
  }
  // Each of `who` asks for a generation newer than `after` at once.
  std::vector<absl::StatusOr<RingGeneration>> Together(const std::vector<RendezvousOptions>& who, int64_t after,
                                                       absl::Duration timeout = absl::Seconds(10)) {
    std::vector<absl::StatusOr<RingGeneration>> out(who.size(), absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (size_t i = 0; i < who.size(); ++i) {
      threads.emplace_back([&, i] { out[i] = NextRingGeneration(etcd_.get(), who[i], after, timeout); });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  std::mutex mu_;
  std::set<int> live_;
};

TEST_F(RingRendezvousTest, SurvivorsOfADeathFormTheNextRingWithoutItAndAJoinerEntersWithTheTrainers) {
  SetLive({0, 1, 2});
  auto first = Together({Trainer(0), Trainer(1), Trainer(2)}, 0);
  for (const auto& g : first) {
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->number, 1);
    EXPECT_EQ(g->trainers, (std::vector<int>{0, 1, 2}));
  }
  EXPECT_EQ(first[2]->RankOf(2), 2);
  EXPECT_EQ(first[2]->RankOf(5), -1);

  // Trainer 1 dies; its entry goes a little later (its lease). The
  // survivors wait for it to say ready until then.
  std::thread lease_runs_out([this] {
    absl::SleepFor(absl::Milliseconds(300));
    SetLive({0, 2});
  });
  auto second = Together({Trainer(0), Trainer(2)}, 1);
  lease_runs_out.join();
  for (const auto& g : second) {
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_GT(g->number, 1);
    EXPECT_EQ(g->trainers, (std::vector<int>{0, 2}));
  }
  EXPECT_EQ(second[0]->number, second[1]->number);

  // A joiner on id 3 alone: the others train on, so it waits, naming them.
  SetLive({0, 2, 3});
  absl::StatusOr<RingGeneration> alone = NextRingGeneration(etcd_.get(), Trainer(3), 0, absl::Milliseconds(300));
  ASSERT_FALSE(alone.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(alone.status())) << alone.status();
  EXPECT_NE(alone.status().message().find("trainer(s) 0, 2 of generation"), std::string::npos) << alone.status();
  // At their next commit they come: one ring of the three.
  auto third = Together({Trainer(0), Trainer(2), Trainer(3)}, second[0]->number);
  for (size_t i = 0; i < third.size(); ++i) {
    ASSERT_TRUE(third[i].ok()) << third[i].status();
    EXPECT_EQ(third[i]->trainers, (std::vector<int>{0, 2, 3}));
    EXPECT_EQ(third[i]->number, third[0]->number);
  }
}

TEST_F(RingRendezvousTest, AProcessOnADeadTrainersIdDoesNotTakeARingItNeverSaidReadyTo) {
  SetLive({0, 1});
  auto first = Together({Trainer(0), Trainer(1)}, 0);
  ASSERT_TRUE(first[0].ok() && first[1].ok());
  // Trainer 1's process dies and another starts on its id: the sealed
  // generation names id 1, but not this process.
  absl::StatusOr<RingGeneration> replacement =
      NextRingGeneration(etcd_.get(), Trainer(1, "host pid 999"), 0, absl::Milliseconds(300));
  ASSERT_FALSE(replacement.ok()) << "took generation " << replacement->number;
  auto both = Together({Trainer(0), Trainer(1, "host pid 999")}, first[0]->number);
  for (const auto& g : both) {
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_GT(g->number, first[0]->number);
    EXPECT_EQ(g->trainers, (std::vector<int>{0, 1}));
  }
}

TEST_F(RingRendezvousTest, FewerLiveTrainersThanMinAreNamedWhenTheWaitRunsOut) {
  SetLive({0, 1});
  RendezvousOptions a = Trainer(0), b = Trainer(1);
  a.min_trainers = b.min_trainers = 3;
  auto got = Together({a, b}, 0, absl::Milliseconds(400));
  for (const auto& g : got) {
    ASSERT_FALSE(g.ok());
    EXPECT_TRUE(absl::IsDeadlineExceeded(g.status()));
    EXPECT_NE(g.status().message().find("the job's fewest trainers (--trainers MIN:MAX): 2 of 3 live"),
              std::string::npos)
        << g.status();
  }
}

// Trainer 1 stuck in ring 1 with its lease renewed: trainers 0 and 2,
// which left that ring, wait for it `silence`, then revoke its lease and
// form the next ring without it; one their ring's collective timed out on
// is out at once. A joiner, which left no ring, never takes
// out the trainers it waits on (they train on to their commit), nor does
// trainer 1 back from its stop (its ring-mates went on without it).
TEST_F(RingRendezvousTest, ATrainerOfTheRingItLeftSilentForTheLeasesTtlIsTakenOutButNotByAJoiner) {
  std::vector<RendezvousOptions> all = {Member(0), Member(1), Member(2)};
  auto first = Together(all, 0);
  for (const auto& g : first) {
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_EQ(g->trainers, (std::vector<int>{0, 1, 2}));
  }
  const absl::Time left = absl::Now();
  for (RendezvousOptions* o : {&all[0], &all[2]}) {
    o->left = RendezvousOptions::Left{first[0]->number, first[0]->trainers, left};
    o->silence = absl::Milliseconds(500);
  }
  auto second = Together({all[0], all[2]}, first[0]->number);
  const absl::Duration took = absl::Now() - left;
  for (const auto& g : second) {
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->trainers, (std::vector<int>{0, 2}));
    EXPECT_EQ(g->number, second[0]->number);
  }
  EXPECT_GE(took, absl::Milliseconds(500)) << "taken out before it was silent for the TTL";
  EXPECT_FALSE(Registered(1));
  EXPECT_TRUE(Registered(0) && Registered(2));

  // Trainer 2 stuck in ring 2, which timed out on it (Left::silent): out
  // at once, without the `silence`.
  auto third_ring = second[0];
  all[0].left = RendezvousOptions::Left{third_ring->number, third_ring->trainers, absl::Now(), {2}};
  all[0].silence = absl::Minutes(10);
  absl::StatusOr<RingGeneration> by_itself =
      NextRingGeneration(etcd_.get(), all[0], third_ring->number, absl::Seconds(20));
  ASSERT_TRUE(by_itself.ok()) << by_itself.status();
  EXPECT_EQ(by_itself->trainers, (std::vector<int>{0}));
  EXPECT_FALSE(Registered(2));
  all[2] = Member(2);  // back, registered again

  // A joiner waits on trainers 0 and 2, training in ring 2, and leaves them be.
  RendezvousOptions joiner = Member(3);
  joiner.silence = absl::Milliseconds(100);
  absl::StatusOr<RingGeneration> alone = NextRingGeneration(etcd_.get(), joiner, 0, absl::Milliseconds(800));
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().message().find("trainer(s) 0, 2 of generation"), std::string::npos) << alone.status();
  EXPECT_TRUE(Registered(0) && Registered(2));

  // Trainer 1 wakes, registers again and comes back from ring 1: its
  // ring-mates went on without it, and it leaves them be too.
  RendezvousOptions back = Member(1);
  back.left = RendezvousOptions::Left{first[0]->number, first[0]->trainers, absl::Now() - absl::Seconds(10)};
  back.silence = absl::Milliseconds(100);
  absl::StatusOr<RingGeneration> straggler = NextRingGeneration(etcd_.get(), back, 0, absl::Milliseconds(800));
  ASSERT_FALSE(straggler.ok());
  EXPECT_TRUE(Registered(0) && Registered(2) && Registered(3));
}

}  // namespace
}  // namespace oar::elastic
