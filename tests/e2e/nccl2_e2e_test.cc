// nccl2 mode end to end with real `oar` processes on loopback, over both
// ways trainers on one host all-reduce (shared memory, what `auto` picks
// here, and the TCP ring): `oar launch --mode nccl2` trains step for step
// as one process on as many places; an uneven split ends without a hang and
// says what was left unused; a killed trainer, or trainers running
// different programs, end every other trainer with an error naming the rank
// and its endpoint — within FLAGS_rpc_deadline + 5 s.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "cli/process_group.h"
#include "gtest/gtest.h"
#include "tests/util/listen_socket.h"
#include "tests/util/oar_process.h"
#include "tests/util/step_log.h"

namespace oar {
namespace {

const std::string& kSmall = kSmallRun;

void CheckAgainstPlaces(int trainers, int places, const std::string& transport) {
  const std::string dir = TempDir("nccl2_" + std::to_string(trainers) + "x" + std::to_string(places) + "_" + transport);
  Result ref = Oar("train " + kSmall + " --places " + std::to_string(trainers * places) +
                   " --max_steps 10 --step_log " + dir + "/ref.steps");
  ASSERT_EQ(ref.code, 0) << ref.out;
  Result r = Oar("launch --mode nccl2 --trainers " + std::to_string(trainers) + " --cpu_num " + std::to_string(places) +
                 " " + kSmall + " --max_steps 10 --step_log_dir " + dir + " --collective_transport=" + transport +
                 " --log_dir " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  // Each trainer says how it joined the others.
  std::ifstream log(dir + "/trainer.0.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(transport == "shm" ? "all-reduce through shared memory" : "all-reduce over the TCP ring"),
            std::string::npos)
      << text;
  // So does the summary.
  EXPECT_NE(r.out.find("nccl2, " + std::to_string(trainers) + " trainer(s) over " +
                       (transport == "shm" ? "shared memory" : "the TCP ring") + ": done"),
            std::string::npos)
      << r.out;
  const auto want = ReadSteps(dir + "/ref.steps");
  ASSERT_EQ(want.size(), 10u);
  std::vector<std::vector<double>> got;
  for (int t = 0; t < trainers; ++t) got.push_back(ReadSteps(dir + "/trainer." + std::to_string(t) + ".steps"));
  for (size_t s = 0; s < want.size(); ++s) {
    double mean = 0;
    for (const auto& g : got) {
      ASSERT_EQ(g.size(), want.size());
      mean += g[s] / trainers;
    }
    EXPECT_NEAR(mean, want[s], 1e-6) << "step " << s;
  }
  EXPECT_GT(std::abs(want.back() - want.front()), 1e-3);  // it trains
}

class Nccl2TransportTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Nccl2TransportTest, TwoTrainersOnOnePlaceMatchOneProcessOnTwoStepByStep) {
  CheckAgainstPlaces(2, 1, GetParam());
}
TEST_P(Nccl2TransportTest, TwoTrainersOnTwoPlacesMatchOneProcessOnFourStepByStep) {
  CheckAgainstPlaces(2, 2, GetParam());
}

TEST(Nccl2E2eTest, UnevenShardsEndTogetherAndSayWhatWasLeft) {
  // 201 examples, a global batch of 200: trainer 0 has 2 batches, trainer 1 one.
  Result r = Oar("launch --mode nccl2 --trainers 2 --model fashion_mlp --limit 201 --batch_size 200 --epochs 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("examples left unused so every trainer stopped at the same step: trainer 0: 1"),
            std::string::npos)
      << r.out;
}

// Two examples over three trainers: no trainer can take a step. That is an
// error naming why, not "done" with a loss of 0.
TEST(Nccl2E2eTest, AJobInWhichNoTrainerStepsIsAnError) {
  Result r = Oar("launch --mode nccl2 --trainers 3 --model fashion_mlp --limit 2 --epochs 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("made no training step: its share of fashion_mnist"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("last loss"), std::string::npos) << r.out;
}

// Trainers as separate `oar run` processes, each told its role by PADDLE_*.
struct Trainers {
  std::vector<std::string> eps;
  cli::ProcessGroup group;
  absl::Mutex mu;
  std::vector<std::vector<std::string>> logs;
  int stepped = 0;
  std::map<size_t, int> codes;

  Trainers(int n, int deadline_ms, const std::function<std::vector<std::string>(int)>& extra) {
    std::vector<HandedSocket> sockets;  // each trainer is handed its own, listening already
    for (int i = 0; i < n; ++i) {
      sockets.push_back(ListenForChild());
      eps.push_back(sockets.back().endpoint());
    }
    logs.resize(static_cast<size_t>(n));
    std::vector<cli::ChildSpec> specs;
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> args = {OarBinary(),       "run",      "--mode=nccl2",
                                       "--batch_size=64", "--report", "--rpc_deadline=" + std::to_string(deadline_ms)};
      for (const auto& a : extra(i)) args.push_back(a);
      specs.push_back({"trainer." + std::to_string(i),
                       args,
                       {{"PADDLE_TRAINING_ROLE", "TRAINER"},
                        {"PADDLE_TRAINERS_NUM", std::to_string(n)},
                        {"PADDLE_TRAINER_ID", std::to_string(i)},
                        {"PADDLE_TRAINER_ENDPOINTS", absl::StrJoin(eps, ",")},
                        {"PADDLE_CURRENT_ENDPOINT", eps[i]},
                        {"OPENBLAS_NUM_THREADS", "1"}},
                       {},
                       {sockets[static_cast<size_t>(i)].fd}});
    }
    EXPECT_TRUE(group
                    .Start(std::move(specs),
                           [this](size_t c, const std::string& line, bool) {
                             absl::MutexLock l(&mu);
                             logs[c].push_back(line);
                             if (line.rfind("@oar progress", 0) == 0) ++stepped;
                           })
                    .ok());
  }
  bool AwaitSteps(int n, absl::Duration d) {
    absl::MutexLock l(&mu);
    struct Want {
      Trainers* t;
      int n;
    } w{this, n};
    return mu.AwaitWithTimeout(absl::Condition(
                                   +[](Want* w) ABSL_NO_THREAD_SAFETY_ANALYSIS { return w->t->stepped >= w->n; }, &w),
                               d);
  }
  void WaitAll(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (codes.size() < group.size() && std::chrono::steady_clock::now() < until) {
      for (const auto& e : group.Poll()) codes[e.index] = e.code;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    group.StopAll(1000);
    group.DrainOutput();
  }
  std::string Log(size_t i) {
    absl::MutexLock l(&mu);
    return absl::StrJoin(logs[i], "\n");
  }
};

// Over shared memory nothing closes when a trainer dies: the others see its
// process gone.
TEST_P(Nccl2TransportTest, AKilledTrainerFailsEveryOtherNamingItsRankAndEndpoint) {
  Trainers t(3, /*deadline_ms=*/4000, [](int) {
    return std::vector<std::string>{"--model=fashion_mlp", "--epochs=5", "--collective_transport=" + GetParam()};
  });
  ASSERT_TRUE(t.AwaitSteps(3, absl::Seconds(60))) << "the trainers never started training";
  t.group.SignalOne(1, SIGKILL);
  t.WaitAll(30);  // bounded: a trainer still running after 30 s counts as hung
  for (size_t i : {0u, 2u}) {
    ASSERT_TRUE(t.codes.count(i)) << "trainer " << i << " hung";
    EXPECT_NE(t.codes[i], 0) << t.Log(i);
  }
  // Trainer 2 reads from trainer 1 on the ring; over shared memory every
  // trainer waits for it: it names it.
  EXPECT_NE(t.Log(2).find("rank 1 (" + t.eps[1] + ")"), std::string::npos) << t.Log(2);
  if (GetParam() == "shm") {
    EXPECT_NE(t.Log(0).find("rank 1 (" + t.eps[1] + ") exited"), std::string::npos) << t.Log(0);
  }
}

TEST_P(Nccl2TransportTest, TrainersWithDifferentProgramsFailNamingTheVariableAndBothRanks) {
  Trainers t(2, 4000, [](int i) {
    return std::vector<std::string>{i == 0 ? "--model=fashion_mlp" : "--model=fashion_cnn", "--epochs=1",
                                    "--collective_transport=" + GetParam()};
  });
  t.WaitAll(60);
  bool named = false;
  for (size_t i : {0u, 1u}) {
    ASSERT_TRUE(t.codes.count(i)) << "trainer " << i << " hung";
    EXPECT_NE(t.codes[i], 0) << t.Log(i);
    named |= t.Log(i).find("programs disagree") != std::string::npos;
  }
  EXPECT_TRUE(named) << t.Log(0) << "\n---\n" << t.Log(1);
}

// Trainers started with another --seed and --batch_size would split the
// data wrongly (and scale the loss for another batch): every trainer fails
// as they join, naming both settings and both trainers.
TEST_P(Nccl2TransportTest, TrainersWithDifferentSettingsFailNamingEachDifference) {
  Trainers t(2, 20000, [](int i) {
    return std::vector<std::string>{"--model=fashion_mlp",
                                    "--epochs=1",
                                    "--limit=2000",
                                    i == 0 ? "--seed=3" : "--seed=4",
                                    i == 0 ? "--batch_size=64" : "--batch_size=32",
                                    "--collective_transport=" + GetParam()};
  });
  t.WaitAll(60);
  for (size_t i : {0u, 1u}) {
    ASSERT_TRUE(t.codes.count(i)) << "trainer " << i << " hung";
    EXPECT_NE(t.codes[i], 0) << t.Log(i);
    EXPECT_NE(t.Log(i).find("trainer 1 trains with --batch_size 32, --seed 4 but trainer 0 with --batch_size 64, "
                            "--seed 3; start every trainer with the same --batch_size, --seed, --limit, --epochs, "
                            "--max_steps, --cpu_num"),
              std::string::npos)
        << t.Log(i);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, Nccl2TransportTest, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace oar
