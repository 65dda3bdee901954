// Distributed training end to end: real `oar` processes on loopback, as a
// user runs them with `oar launch`. Jobs in which a process dies or fails:
// failure_e2e_test.cc.
#include <signal.h>

#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "cli/process_group.h"
#include "gtest/gtest.h"
#include "tests/util/oar_process.h"
#include "tests/util/step_log.h"

namespace oar {
namespace {

// A small fashion_mlp run: the same data, order and constant initial values
// everywhere, 10 steps of a global batch of 64, plain SGD. (Adam's first
// steps divide by the gradients' own magnitude, so where a gradient is
// float noise the two runs step differently by up to the learning rate;
// tests/transpiler compares Adam in-process on a model without such ties.)
const std::string& kSmall = kSmallRun;

// The two trainers' step logs in `dir` against the single process's
// (ref.steps), `steps` each: Fluid's method, each trainer's loss on its half
// of the global batch, so their mean is the single process's loss. Returns
// the reference.
std::vector<double> ExpectTwoTrainersMakeTheReference(const std::string& dir, size_t steps) {
  const auto want = ReadSteps(dir + "/ref.steps");
  const auto t0 = ReadSteps(dir + "/trainer.0.steps"), t1 = ReadSteps(dir + "/trainer.1.steps");
  EXPECT_EQ(want.size(), steps);
  EXPECT_EQ(t0.size(), steps);
  EXPECT_EQ(t1.size(), steps);
  for (size_t s = 0; s < std::min({want.size(), t0.size(), t1.size()}); ++s) {
    EXPECT_NEAR((t0[s] + t1[s]) / 2, want[s], 1e-5) << "step " << s;
  }
  return want;
}

// From seeded random values: with --no_slice each pserver initializes its
// whole parameters with the startup program's ops, as the single process
// does (a sliced block draws its own values, as in Fluid; the sliced case
// starts from saved values below).
TEST(DistE2eTest, SyncTwoByTwoMatchesTheSingleProcessStepByStep) {
  const std::string dir = TempDir("sync");
  Result ref = Oar("train " + kSmall + " --max_steps 10 --step_log " + dir + "/ref.steps");
  ASSERT_EQ(ref.code, 0) << ref.out;
  Result dist = Oar("launch --pservers 2 --trainers 2 --no_slice " + kSmall + " --max_steps 10 --step_log_dir " + dir);
  ASSERT_EQ(dist.code, 0) << dist.out;
  const auto want = ExpectTwoTrainersMakeTheReference(dir, 10);
  // The parameters move: the comparison is not of a flat line.
  double moved = 0;
  for (size_t s = 1; s < want.size(); ++s) moved = std::max(moved, std::abs(want[s] - want[s - 1]));
  EXPECT_GT(moved, 1e-3);
}

// A program PaddlePaddle 2.6 wrote (tests/testdata/paddle/fashion_mlp),
// transpiled for 2 pservers x 2 sync trainers, makes the single process's
// losses. With --no_slice each pserver initializes whole parameters with
// the startup program's own seeded ops, so both runs start from the same
// values (a sliced block gets its own initializer op of the block's shape,
// and trainers start from the pservers' values, as in Fluid).
TEST(DistE2eTest, PaddleWrittenProgramTwoByTwoMatchesTheSingleProcess) {
  const std::string dir = TempDir("paddle_program");
  const std::string f = TestdataDir() + "/paddle/fashion_mlp";
  const std::string args = "--program " + f + "/main.pb --startup " + f + "/startup.pb --feed_names x,label " +
                           "--loss_name mean_1.tmp_0 --limit 2000 --batch_size 64 --seed 3 --max_steps 10";
  Result ref = Oar("train " + args + " --step_log " + dir + "/ref.steps");
  ASSERT_EQ(ref.code, 0) << ref.out;
  Result dist = Oar("launch --pservers 2 --trainers 2 --no_slice " + args + " --step_log_dir " + dir);
  ASSERT_EQ(dist.code, 0) << dist.out;
  const auto want = ExpectTwoTrainersMakeTheReference(dir, 10);
  ASSERT_EQ(want.size(), 10u);
  EXPECT_GT(want.front() - want.back(), 0.5);  // it trains: SGD 0.1 takes the loss from 2.5 to 1.5
}

// The same program from Paddle's own saved parameters (--params) on the
// pservers, whose parameter blocks and Momentum accumulators are sliced
// (fc_0.w_0 across both pservers): each takes its rows of the saved
// values, and the job makes `oar train --params`'s losses. (Without
// --params the sliced blocks start from their own initializer ops.)
TEST(DistE2eTest, PaddleParamsOnSlicedPserversMatchTheSingleProcess) {
  const std::string dir = TempDir("paddle_params");
  const std::string f = TestdataDir() + "/paddle/fashion_mlp";
  const std::string args = "--program " + f + "/main.pb --startup " + f + "/startup.pb --feed_names x,label " +
                           "--loss_name mean_1.tmp_0 --limit 2000 --batch_size 64 --seed 3 --max_steps 10 " +
                           "--params " + f + "/params";
  Result ref = Oar("train " + args + " --step_log " + dir + "/ref.steps");
  ASSERT_EQ(ref.code, 0) << ref.out;
  Result dist = Oar("launch --pservers 2 --trainers 2 " + args + " --step_log_dir " + dir);
  ASSERT_EQ(dist.code, 0) << dist.out;
  EXPECT_NE(dist.out.find("variable(s) from " + f + "/params"), std::string::npos) << dist.out;
  const auto want = ExpectTwoTrainersMakeTheReference(dir, 10);
  ASSERT_EQ(want.size(), 10u);
  EXPECT_GT(want.front() - want.back(), 0.5);
  // nccl2 mode: every trainer loads them whole, and all-reduces.
  std::filesystem::remove(dir + "/trainer.0.steps");
  std::filesystem::remove(dir + "/trainer.1.steps");
  Result nccl2 = Oar("launch --mode nccl2 --trainers 2 " + args + " --step_log_dir " + dir);
  ASSERT_EQ(nccl2.code, 0) << nccl2.out;
  ExpectTwoTrainersMakeTheReference(dir, 10);
}

// Each trainer data-parallel over 2 CPU places: the ParallelExecutor
// all-reduces the places' gradients and place 0 alone talks to the pservers,
// which hold sliced blocks of Paddle's saved (random, trained) values.
TEST(DistE2eTest, SyncTrainersOnTwoPlacesEachMatchTheSingleProcess) {
  const std::string dir = TempDir("sync_places");
  const std::string f = TestdataDir() + "/paddle/fashion_mlp";
  const std::string args = "--program " + f + "/main.pb --startup " + f + "/startup.pb --feed x,label " +
                           "--loss mean_1.tmp_0 --params " + f + "/params --limit 2000 --batch_size 64 --seed 3 " +
                           "--max_steps 10";
  Result ref = Oar("train " + args + " --step_log " + dir + "/ref.steps");
  ASSERT_EQ(ref.code, 0) << ref.out;
  Result dist = Oar("launch --pservers 2 --trainers 2 --cpu_num 2 " + args + " --step_log_dir " + dir);
  ASSERT_EQ(dist.code, 0) << dist.out;
  ExpectTwoTrainersMakeTheReference(dir, 10);
}

TEST(DistE2eTest, AsyncTwoByTwoTrains) {
  const std::string dir = TempDir("async");
  Result r =
      Oar("launch --pservers 2 --trainers 2 --async --model fashion_mlp --limit 6000 --epochs 1 "
          "--batch_size 64 --step_log_dir " +
          dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("async"), std::string::npos) << r.out;
  for (int t = 0; t < 2; ++t) {
    const auto steps = ReadSteps(dir + "/trainer." + std::to_string(t) + ".steps");
    ASSERT_GE(steps.size(), 40u) << "trainer " << t;
    double tail = 0;
    for (size_t i = steps.size() - 10; i < steps.size(); ++i) tail += steps[i] / 10;
    EXPECT_LT(tail, 0.5 * steps.front()) << "trainer " << t << " started at " << steps.front();
  }
}

// An async job whose model decays its learning rate on the pservers
// (fashion_cnn): the rate an optimize block reads is computed before the
// first block runs, whichever gradient arrives first (before, the first
// gradient's adam failed: "input LearningRate ('tmp_3') has no value").
TEST(DistE2eTest, AsyncWithALearningRateScheduleTrains) {
  const std::string dir = TempDir("async_lr");
  Result r =
      Oar("launch --pservers 1 --trainers 2 --async --model fashion_cnn --limit 1280 --epochs 1 "
          "--batch_size 64 --step_log_dir " +
          dir);
  ASSERT_EQ(r.code, 0) << r.out;
  for (int t = 0; t < 2; ++t) {
    const auto steps = ReadSteps(dir + "/trainer." + std::to_string(t) + ".steps");
    ASSERT_GE(steps.size(), 8u) << "trainer " << t;
    double tail = 0;
    for (size_t i = steps.size() - 3; i < steps.size(); ++i) tail += steps[i] / 3;
    EXPECT_LT(tail, steps.front()) << "trainer " << t << " started at " << steps.front();
  }
}

TEST(DistE2eTest, UnevenShardsTheShortTrainerCompletesAndTheOtherFinishes) {
  // 201 examples, a global batch of 200: trainer 0 holds 101 (two steps),
  // trainer 1 holds 100 (one step) and says COMPLETE while trainer 0 goes on.
  const std::string dir = TempDir("uneven");
  Result r =
      Oar("launch --pservers 1 --trainers 2 --model fashion_mlp --limit 201 --batch_size 200 --epochs 1 "
          "--rpc_deadline 10000 --step_log_dir " +
          dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(ReadSteps(dir + "/trainer.0.steps").size(), 2u);
  EXPECT_EQ(ReadSteps(dir + "/trainer.1.steps").size(), 1u);
  EXPECT_NE(r.out.find("test_accuracy="), std::string::npos) << r.out;
}

TEST(DistE2eTest, LauncherReportsSuccessAndNamesAFailingRole) {
  Result ok = Oar("launch --pservers 1 --trainers 1 --model fashion_mlp --limit 1000 --epochs 1");
  ASSERT_EQ(ok.code, 0) << ok.out;
  for (const char* want : {"1 pserver(s) x 1 trainer(s), sync", "examples/s", "test_accuracy="}) {
    EXPECT_NE(ok.out.find(want), std::string::npos) << want << "\n" << ok.out;
  }
  Result bad = Oar("launch --pservers 2 --trainers 2 --model nope");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("failed (exit code 1)"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("unknown model 'nope'"), std::string::npos) << bad.out;
  Result count = Oar("launch --pservers two --trainers 2");
  EXPECT_EQ(count.code, 1);
  EXPECT_NE(count.out.find("--pservers takes the number of pservers"), std::string::npos) << count.out;
}

TEST(DistE2eTest, TrainsFromProgramFiles) {
  const std::string dir = TempDir("files");
  ASSERT_EQ(Oar("export --optimizer sgd --lr 0.05 --out " + dir).code, 0);
  const std::string files = " --program " + dir + "/main.pb --startup " + dir + "/startup.pb";
  Result r = Oar("launch --pservers 2 --trainers 2" + files +
                 " --loss_name mean_0.tmp_0 --feed_names x,label --limit 3000 --epochs 1 --step_log_dir " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto steps = ReadSteps(dir + "/trainer.0.steps");
  ASSERT_GE(steps.size(), 20u);
  EXPECT_LT(steps.back(), steps.front());
  Result missing = Oar("launch --pservers 1 --trainers 1 --limit 300" + files);
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("needs --loss_name and --feed_names"), std::string::npos) << missing.out;
}

// Ctrl-C on the launcher, or its terminal closing (SIGHUP), stops every
// process it started; it exits 128 + the signal, as a shell reports it.
TEST(DistE2eTest, InterruptingTheLauncherStopsTheWholeCluster) {
  for (const int sig : {SIGINT, SIGHUP}) {
    SCOPED_TRACE(sig == SIGINT ? "SIGINT" : "SIGHUP");
    // A flag value unique to this test, forwarded to every child's command line.
    const std::string marker = "--rpc_deadline=" + std::to_string(170000 + ::getpid() % 10000);
    cli::ProcessGroup launcher;
    absl::Mutex mu;
    bool training = false;
    std::vector<std::string> out;
    ASSERT_TRUE(launcher
                    .Start({{"launcher",
                             {OarBinary(), "launch", "--pservers=2", "--trainers=2", "--model=fashion_mlp",
                              "--epochs=5", marker},
                             {}}},
                           [&](size_t, const std::string& line, bool) {
                             absl::MutexLock l(&mu);
                             out.push_back(line);
                             if (line.rfind("epoch ", 0) == 0) training = true;
                           })
                    .ok());
    {
      absl::MutexLock l(&mu);
      mu.AwaitWithTimeout(absl::Condition(&training), absl::Seconds(60));
      ASSERT_TRUE(training) << absl::StrJoin(out, "\n");
    }
    launcher.SignalOne(0, sig);
    std::optional<cli::ChildExit> exit;
    for (int i = 0; i < 300 && !exit; ++i) {
      for (const auto& e : launcher.Poll()) exit = e;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(exit.has_value()) << "the launcher did not stop within 15 s";
    EXPECT_EQ(exit->code, 128 + sig);
    launcher.DrainOutput();
    EXPECT_NE(absl::StrJoin(out, "\n").find("interrupted"), std::string::npos) << absl::StrJoin(out, "\n");
    // No process of the cluster is left.
    for (const auto& p : std::filesystem::directory_iterator("/proc")) {
      std::ifstream cmd(p.path() / "cmdline");
      std::string line((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
      EXPECT_EQ(line.find(marker), std::string::npos) << "left running: " << p.path();
    }
  }
}

// A new job given the --checkpoint_dir of an earlier one resumes it: each
// pserver restores its checkpoint, the trainers start from those
// parameters, and every process says so. An epoch is 10 steps here (320
// examples a trainer, 32 a step, in the data's order), so the resumed job's
// 10 steps are epoch 2 of one 20-step job: its losses equal that job's
// steps 11-20, bit for bit.
TEST(DistE2eTest, ANewJobGivenAnEarlierJobsCheckpointDirResumesItWhereItStopped) {
  const std::string dir = TempDir("resume_job");
  // Seeded random initial values (a constant one barely trains in 10 steps).
  const std::string job =
      "launch --pservers 2 --trainers 2 --model fashion_mlp --limit 640 --batch_size 64 --seed 3 "
      "--shuffle none --optimizer sgd --lr 0.05 ";
  const std::string ckpt = "--max_steps 10 --checkpoint_every 10 --checkpoint_dir " + dir + "/ckpt --step_log_dir ";
  Result straight = Oar(job + "--max_steps 20 --step_log_dir " + dir + "/straight");
  ASSERT_EQ(straight.code, 0) << straight.out;
  Result first = Oar(job + ckpt + dir + "/first");
  ASSERT_EQ(first.code, 0) << first.out;
  Result again = Oar(job + ckpt + dir + "/again");
  ASSERT_EQ(again.code, 0) << again.out;
  for (const char* said : {"restored from ", "(step 10): the job goes on from there",
                           "trainer 1 starts from this pserver's checkpoint of step 10",
                           "holds a checkpoint of step 10: trainer 0 starts from it"}) {
    EXPECT_NE(again.out.find(said), std::string::npos) << said << "\n" << again.out;
  }
  EXPECT_EQ(again.out.find("step -1"), std::string::npos) << again.out;
  for (const char* t : {"/trainer.0.steps", "/trainer.1.steps"}) {
    const auto whole = ReadSteps(dir + "/straight" + t), a = ReadSteps(dir + "/first" + t),
               b = ReadSteps(dir + "/again" + t);
    ASSERT_EQ(whole.size(), 20u);
    ASSERT_EQ(a.size(), 10u);
    ASSERT_EQ(b.size(), 10u);
    EXPECT_EQ(a, std::vector<double>(whole.begin(), whole.begin() + 10)) << t;
    EXPECT_EQ(b, std::vector<double>(whole.begin() + 10, whole.end())) << t
                                                                       << ": the resumed job did not go on "
                                                                          "from the first one's parameters";
  }
}

// The whole user path with faults: `oar launch` passes --rpc_fault_injection
// to every process; trainers' calls are dropped, answered-then-lost,
// duplicated, delayed and reordered, and each step's loss is the same, bit
// for bit, as in the launch without faults.
TEST(DistE2eTest, SyncTwoByTwoUnderInjectedFaultsEqualsTheFaultFreeRunStepByStep) {
  const std::string clean = TempDir("faults_clean"), faulty = TempDir("faults_on");
  Result a = Oar("launch --pservers 2 --trainers 2 " + kSmall + " --max_steps 10 --step_log_dir " + clean);
  ASSERT_EQ(a.code, 0) << a.out;
  Result b = Oar("launch --pservers 2 --trainers 2 " + kSmall + " --max_steps 10 --step_log_dir " + faulty +
                 " --rpc_fault_injection=seed=5,drop_request=0.05,drop_reply=0.05,duplicate=0.1,delay=0.1,"
                 "reorder=0.1,max_delay_ms=10 --rpc_retry_times=20");
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("injecting RPC faults"), std::string::npos) << b.out;
  // Each trainer says what it injected: faults of each kind did fire.
  const std::regex said(
      R"((\d+) calls: (\d+) requests dropped, (\d+) replies dropped, (\d+) duplicated, (\d+) delayed, (\d+) reordered)");
  int reports = 0;
  std::array<int64_t, 5> fired{};
  for (std::sregex_iterator m(b.out.begin(), b.out.end(), said), end; m != end; ++m, ++reports) {
    for (size_t k = 0; k < fired.size(); ++k) fired[k] += std::stoll((*m)[k + 2].str());
  }
  EXPECT_EQ(reports, 2) << b.out;
  for (size_t k = 0; k < fired.size(); ++k) EXPECT_GT(fired[k], 0) << "fault kind " << k << " never fired\n" << b.out;
  for (const char* t : {"/trainer.0.steps", "/trainer.1.steps"}) {
    const auto want = ReadSteps(clean + t), got = ReadSteps(faulty + t);
    ASSERT_EQ(want.size(), 10u);
    EXPECT_EQ(got, want) << t;
  }
}

}  // namespace
}  // namespace oar
