// A pserver that crashes and restarts from its last checkpoint_notify
// checkpoint, in a 2 pservers x 2 trainers sync job on the in-process
// transport: the trainers ride out the outage (their calls fail
// UNAVAILABLE and are retried), the restored pserver makes each trainer
// resync — resending the step it has lost — and the job finishes. A restart
// right after the checkpoint ends with exactly the parameters of a run
// without it. The same for async (which rolls back to the checkpoint and
// goes on).
#include <cmath>
#include <cstring>
#include <filesystem>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/util/inproc_job.h"
#include "tests/util/oar_process.h"

namespace oar {
namespace {

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Not there yet (the checkpoint makes it); removed when the binary exits.
std::string FreshDir(const std::string& name) {
  const std::string dir = TempDir("restart_" + name);
  std::filesystem::remove_all(dir);
  return dir;
}

class PserverRestartTest : public ::testing::TestWithParam<int> {};

// Trainer `restarter` checkpoints after step 4 and crashes pserver 0 at once;
// the other trainer is wherever its thread has got to.
TEST_P(PserverRestartTest, ARestartRightAfterACheckpointLosesNothing) {
  const int restarter = GetParam();
  JobSpec clean_spec;
  const JobResult clean = RunJob(clean_spec);
  ASSERT_TRUE(clean.ok()) << clean.Errors();
  const std::string dir = FreshDir(std::to_string(restarter));
  JobSpec spec;
  absl::Status restart = absl::UnknownError("never restarted");
  spec.after_step = [&](int trainer, int step, JobControl& job) {
    if (trainer != restarter || step != 4) return;
    restart = job.Checkpoint(dir);
    EXPECT_TRUE(std::filesystem::exists(dir + "/pserver_0/__manifest__"));
    if (restart.ok()) restart = job.RestartPserver(0, dir);
  };
  const JobResult r = RunJob(spec);
  ASSERT_TRUE(restart.ok()) << restart;
  ASSERT_TRUE(r.ok()) << r.Errors();
  for (int t = 0; t < 2; ++t) {
    EXPECT_TRUE(SameBits(r.losses[t], clean.losses[t])) << "trainer " << t;
    for (const auto& p : JobParams()) EXPECT_TRUE(SameBits(r.final[t].at(p), clean.final[t].at(p))) << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Restarter, PserverRestartTest, ::testing::Values(0, 1));

// Later than the checkpoint: pserver 0 rolls back to step 5 while the job
// is at step 8; the job still finishes and trains on. Trainer 1 holds after
// its step 8 until the restart is done: in async mode it could otherwise
// complete before the restart, which the restored pserver cannot know (it
// then waits for that trainer until FLAGS_rpc_deadline and says why).
TEST(PserverRestartTest, ARestartAfterMoreStepsRollsBackAndFinishes) {
  const std::string dir = FreshDir("late");
  for (bool sync : {true, false}) {
    JobSpec spec;
    spec.sync = sync;
    absl::Status restart = absl::UnknownError("never restarted");
    absl::Notification restarted;
    spec.after_step = [&](int trainer, int step, JobControl& job) {
      if (trainer == 1 && step == 8) EXPECT_TRUE(restarted.WaitForNotificationWithTimeout(absl::Seconds(60)));
      if (trainer != 0) return;
      if (step == 4) EXPECT_TRUE(job.Checkpoint(dir).ok());
      if (step == 7) {
        restart = job.RestartPserver(0, dir);
        restarted.Notify();
      }
    };
    const JobResult r = RunJob(spec);
    ASSERT_TRUE(restart.ok()) << restart;
    ASSERT_TRUE(r.ok()) << (sync ? "sync: " : "async: ") << r.Errors();
    EXPECT_EQ(r.losses[0].size(), 10u);
    if (sync) {  // deterministic: still learning after the rollback
      EXPECT_LT(r.losses[0].back(), r.losses[0].front());
    } else {  // async interleaving varies run to run (a loaded machine reorders it): finite, not ordered
      for (float l : r.losses[0]) EXPECT_TRUE(std::isfinite(l)) << "async loss " << l;
    }
  }
}

}  // namespace
}  // namespace oar
