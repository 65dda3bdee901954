// How a one-host `oar launch` shares the CPUs (cli/host_share.h): which
// CPUs each trainer is bound to, that a child of ProcessGroup really runs on
// them, what its children are told for BLAS threads and waits, and the
// launcher's wiring.
#include "cli/host_share.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "cli/process_group.h"
#include "gtest/gtest.h"
#include "tests/util/oar_process.h"

namespace oar::cli {
namespace {

using Lists = std::vector<std::vector<int>>;

TEST(HostShareTest, AutoBindsOnlyWhenTheProcessesOutnumberTheCpus) {
  EXPECT_EQ(*TrainerCpus({0, 1}, 2, 4, -1), (Lists{{0}, {1}}));      // 2 pservers x 2 trainers on 2 cores
  EXPECT_EQ(*TrainerCpus({0, 1, 2, 3}, 2, 4, -1), (Lists{{}, {}}));  // a core each already
  EXPECT_EQ(*TrainerCpus({0, 1}, 3, 4, -1), (Lists{{}, {}, {}})) << "more trainers than CPUs: no binding";
  EXPECT_EQ(*TrainerCpus({0, 1}, 2, 4, 0), (Lists{{}, {}}));
}

TEST(HostShareTest, SharesAreContiguousAndTheFirstTrainersTakeTheRemainder) {
  EXPECT_EQ(*TrainerCpus({0, 2, 3, 5, 6}, 2, 2, 1), (Lists{{0, 2, 3}, {5, 6}}));
  EXPECT_EQ(*TrainerCpus({4, 5, 6, 7, 8, 9, 10}, 3, 9, -1), (Lists{{4, 5, 6}, {7, 8}, {9, 10}}));
}

TEST(HostShareTest, BindingMoreTrainersThanCpusIsAnErrorThatSaysWhy) {
  auto r = TrainerCpus({0, 1}, 3, 4, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("3 trainers but 2 CPUs to run on (0-1)"), std::string::npos) << r.status();
  EXPECT_FALSE(TrainerCpus({0, 1}, 2, 4, 2).ok());
}

TEST(HostShareTest, CpuListsReadAsTasksetWritesThem) {
  EXPECT_EQ(CpuListText({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(CpuListText({3}), "3");
  EXPECT_EQ(CpuListText({}), "");
}

TEST(HostShareTest, WaitsSpinOnlyWhileEveryProcessHasACpu) {
  using Env = std::vector<std::pair<std::string, std::string>>;
  Tuning spare = ChildTuning(4, 8, {});  // 2 x 2 on 8 CPUs
  EXPECT_EQ(spare.flags, std::vector<std::string>{"--rpc_shm_spin_us=50"});
  EXPECT_EQ(spare.env, (Env{{"OPENBLAS_NUM_THREADS", "2"}}));
  Tuning crowded = ChildTuning(4, 2, {});  // 2 x 2 on 2 CPUs
  EXPECT_EQ(crowded.flags, (std::vector<std::string>{"--rpc_shm_batch_wakeups=1", "--rpc_shm_spin_us=0"}));
  EXPECT_EQ(crowded.env, (Env{{"OPENBLAS_NUM_THREADS", "1"}}));
  EXPECT_EQ(ChildTuning(2, 1, {}).flags.back(), "--rpc_shm_spin_us=0") << "one CPU: nobody to spin for";
  Tuning user = ChildTuning(4, 2, {.blas_threads = true, .batch_wakeups = true, .shm_spin = true});
  EXPECT_TRUE(user.flags.empty());
  EXPECT_TRUE(user.env.empty()) << "what the user set is theirs";
}

// What a child's /proc/self/status says it may run on.
std::vector<std::string> ChildCpuLists(std::vector<ChildSpec> specs) {
  absl::Mutex mu;
  std::vector<std::string> lists(specs.size());
  ProcessGroup g;
  EXPECT_TRUE(g.Start(std::move(specs), [&](size_t c, const std::string& line, bool) {
                 absl::MutexLock l(&mu);
                 lists[c] = line;
               }).ok());
  for (int waited = 0; waited < 1000; ++waited) {  // at most 10 s
    bool any = false;
    g.Poll();
    for (size_t i = 0; i < g.size(); ++i) any |= g.running(i);
    if (!any) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  g.DrainOutput();
  return lists;
}

TEST(HostShareTest, AChildRunsOnTheCpusItsSpecNames) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const std::vector<std::string> sh = {"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"};
  std::vector<ChildSpec> specs = {{"bound", sh, {}, {allowed.back()}}, {"free", sh, {}, {}}};
  const std::vector<std::string> got = ChildCpuLists(std::move(specs));
  EXPECT_EQ(got[0], "Cpus_allowed_list:\t" + std::to_string(allowed.back()));
  EXPECT_EQ(got[1], "Cpus_allowed_list:\t" + CpuListText(allowed)) << "an unbound child keeps the launcher's CPUs";
}

TEST(HostShareTest, LaunchBindsItsTrainersAndSaysWhere) {
  const std::vector<int> allowed = AllowedCpus();
  const std::string job = "launch --pservers 1 --trainers 1 --epochs 1 --limit 256 --batch_size 64 ";
  Result bound = Oar(job + "--bind_trainers=1");
  ASSERT_EQ(bound.code, 0) << bound.out;
  EXPECT_NE(bound.out.find("trainers bound to CPUs " + CpuListText(allowed) + " (one list each)"), std::string::npos)
      << bound.out;
  Result refused = Oar(job + "--bind_trainers=1 --trainers " + std::to_string(allowed.size() + 1));
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.out.find("each trainer needs one of its own"), std::string::npos) << refused.out;
  EXPECT_EQ(std::count(refused.out.begin(), refused.out.end(), '\n'), 1) << refused.out;
}

}  // namespace
}  // namespace oar::cli
