// The pservers' agreement on a departed trainer's last step, against a real
// etcd: whatever each saw (one had its barrier, one only its gradients, one
// had applied the step already and moved on), all return the same step;
// a pserver that never records is named once the wait runs out.
#include "common/elastic/leave_agreement.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/etcd_server.h"

namespace oar::elastic {
namespace {

class LeaveAgreementTest : public EtcdTest {};

TEST_F(LeaveAgreementTest, EveryPserverReturnsTheHighestStepAnyOfThemSawTheTrainerContributeTo) {
  // Pserver 0 is still collecting step 7 and has the trainer's barrier;
  // pserver 1 collects step 7 without it; pserver 2 applied step 7 with it
  // and collects step 8.
  const std::vector<StepView> seen = {{.step = 7, .contributed = true, .contributed_before = true},
                                      {.step = 7, .contributed = false, .contributed_before = true},
                                      {.step = 8, .contributed = false, .contributed_before = true}};
  std::vector<absl::StatusOr<int64_t>> agreed(3, int64_t{-2});
  std::vector<std::thread> pservers;
  for (int p = 0; p < 3; ++p) {
    pservers.emplace_back([&, p] {
      agreed[p] = AgreeOnLastStep(etcd_.get(), "job", "trainer1/0/host_pid_5", p, 3, seen[p], -1, absl::Seconds(5));
    });
  }
  for (auto& t : pservers) t.join();
  for (int p = 0; p < 3; ++p) {
    ASSERT_TRUE(agreed[p].ok()) << agreed[p].status();
    EXPECT_EQ(*agreed[p], 7) << "pserver " << p;
  }
  // A trainer that joined at step 3 and contributed to nothing: `none`.
  std::vector<absl::StatusOr<int64_t>> none(2, int64_t{-2});
  std::vector<std::thread> two;
  for (int p = 0; p < 2; ++p) {
    two.emplace_back([&, p] {
      none[p] = AgreeOnLastStep(etcd_.get(), "job", "trainer2/3/host_pid_6", p, 2, {.step = 3}, 2, absl::Seconds(5));
    });
  }
  for (auto& t : two) t.join();
  for (const auto& n : none) {
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, 2);
  }
}

TEST_F(LeaveAgreementTest, APserverThatNeverRecordsIsNamedWhenTheWaitRunsOut) {
  absl::StatusOr<int64_t> alone =
      AgreeOnLastStep(etcd_.get(), "job", "trainer0/0/host_pid_7", 0, 3, {.step = 4}, -1, absl::Milliseconds(300));
  ASSERT_FALSE(alone.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(alone.status()));
  EXPECT_NE(alone.status().message().find("pserver(s) 1, 2 recorded nothing under /oar/job/leaves/trainer0/0/"),
            std::string::npos)
      << alone.status();
}

}  // namespace
}  // namespace oar::elastic
