// A user's own data in a job (`oar launch`, as the README's "Train a Paddle
// program on your data" runs it): a program PaddlePaddle 2.6.2 wrote, from
// Paddle's saved values, on numpy arrays and on MultiSlot files, as a 2 x 2
// sync pserver job and as a 2-trainer nccl2 job: the trainers' mean loss at
// each step equals the loss Paddle recorded training on both trainers'
// examples together, within 1e-5. Shards that are uneven keep the job's
// guarantees: a sync pserver job completes with a short trainer, and nccl2
// trainers agree on their steps.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/etcd_server.h"
#include "tests/util/oar_process.h"
#include "tests/util/own_data.h"
#include "tests/util/step_log.h"

namespace oar {
namespace {

const std::string kPserver = "launch --pservers 2 --trainers 2 ";
const std::string kNccl2 = "launch --mode nccl2 --trainers 2 ";

std::string Mlp() {
  return "--program " + kMlp + "/main.pb --startup " + kMlp + "/startup.pb --params " + kMlp +
         "/params --feed_names x,label --loss_name mean_1.tmp_0 --batch_size 16 --epochs 5 --data npy:" + kMlpData +
         "/npy ";
}

// The MultiSlot lines in one file: trainer t takes every other line, its
// half of each of Paddle's batches (two files would give each trainer
// other batches than Paddle's steps).
std::string Ctr(const std::string& dir) {
  std::ofstream all(dir + "/all");
  for (const char* part : {"/part-0", "/part-1"}) all << std::ifstream(kCtrData + part).rdbuf();
  return "--program " + kCtr + "/main.pb --startup " + kCtr + "/startup.pb --params " + kCtr +
         "/params --feed_names slot0,slot1,slot2,slot3,dense,label --loss_name mean_3.tmp_0 --batch_size 16 "
         "--epochs 5 --data_feed " +
         kCtrData + "/data.desc --files " + dir + "/all ";
}

Result ExpectMeanIsPaddles(const std::string& args, const std::string& fixture, const std::string& tag) {
  const std::string dir = TempDir(tag);
  Result r = Oar(args + " --step_log_dir " + dir);
  EXPECT_EQ(r.code, 0) << r.out;
  const auto t0 = ReadSteps(dir + "/trainer.0.steps"), t1 = ReadSteps(dir + "/trainer.1.steps");
  const auto want = ReadSteps(fixture + "/losses.txt");
  EXPECT_EQ(want.size(), 20u);
  EXPECT_EQ(t0.size(), 20u) << r.out;
  EXPECT_EQ(t1.size(), 20u) << r.out;
  double worst = 0;
  for (size_t s = 0; s < std::min({want.size(), t0.size(), t1.size()}); ++s) {
    const double mean = (t0[s] + t1[s]) / 2;
    EXPECT_NEAR(mean, want[s], 1e-5 * std::abs(want[s])) << tag << " step " << s;
    worst = std::max(worst, std::abs(mean - want[s]) / std::abs(want[s]));
  }
  std::printf("%s: max relative loss error vs Paddle %.3g over 20 steps\n", tag.c_str(), worst);
  return r;
}

TEST(OwnDataE2eTest, NpyArraysInASyncPserverJobMakePaddlesLosses) {
  ExpectMeanIsPaddles(kPserver + Mlp(), kMlp, "npy_pserver");
}

// Async pserver mode reads arrays through the data layer too (values are
// the threads' race, so what is checked is that every example is trained
// once per epoch and trainer 0 evaluates).
TEST(OwnDataE2eTest, NpyArraysInAnAsyncJob) {
  Result r = Oar(kPserver + "--async " + Mlp() + "--test_data npy:" + kMlpData + "/arrays.npz");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("trained on 320 examples"), std::string::npos) << r.out;  // 64 x 5 epochs
  EXPECT_GT(ValueAfter(r.out, "test_loss="), 0) << r.out;
}

TEST(OwnDataE2eTest, NpyArraysInAnNccl2JobMakePaddlesLossesAndEvaluate) {
  Result r = ExpectMeanIsPaddles(kNccl2 + Mlp() + "--test_data npy:" + kMlpData + "/arrays.npz --fetch mean_1.tmp_0",
                                 kMlp, "npy_nccl2");
  // Trainer 0 evaluates the trained program on the test arrays: its loss, and
  // the --fetch metric (here the same variable).
  EXPECT_GT(ValueAfter(r.out, "test_loss="), 0) << r.out;
  EXPECT_NEAR(ValueAfter(r.out, "test_mean_1.tmp_0="), ValueAfter(r.out, "test_loss="), 1e-6) << r.out;
}

// A Paddle-written program whose is_sparse embedding (20000 x 8) the
// transpiler slices over both pservers, with Fluid 1.6's
// runtime_split_send_recv: no split op; the send op cuts the table's
// SelectedRows gradient by the blocks' row ranges as it sends.
TEST(OwnDataE2eTest, ASlicedSparseTableCutAtRunTimeMakesPaddlesLosses) {
  const std::string args = "--program " + kSlicedTable + "/main.pb --startup " + kSlicedTable +
                           "/startup.pb --params " + kSlicedTable +
                           "/params --feed_names ids,label --loss_name mean_0.tmp_0 --batch_size 16 --epochs 5 "
                           "--data npy:" +
                           kSlicedTableData + "/npy --runtime_split_send_recv ";
  ExpectMeanIsPaddles(kPserver + args, kSlicedTable, "sliced_table");
}

TEST(OwnDataE2eTest, MultiSlotFilesInBothModesMakePaddlesLosses) {
  const std::string dir = TempDir("ctr_files");
  ExpectMeanIsPaddles(kPserver + Ctr(dir), kCtr, "multislot_pserver");
  ExpectMeanIsPaddles(kNccl2 + Ctr(dir) + "--dataset in_memory", kCtr, "multislot_nccl2");
}

// An elastic nccl2 job reads the files' lines in memory, each step's batch
// at the job's place in the epoch (rank r of n takes the r-th b lines of
// the step's n x b): the same half of each of Paddle's batches per trainer.
TEST(OwnDataE2eTest, MultiSlotFilesInAnElasticNccl2JobMakePaddlesLosses) {
  OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
  const std::string dir = TempDir("ctr_files_elastic");
  ExpectMeanIsPaddles("launch --elastic --mode nccl2 --trainers 2:2 " + Ctr(dir) + "--dataset in_memory", kCtr,
                      "multislot_elastic_nccl2");
}

// AsyncExecutor trainers (an --async program reading MultiSlot files) start
// from Paddle's saved values, which the pservers load and the trainer
// pulls: its first batch (Paddle's first) has Paddle's first loss, and it
// logs every batch. One trainer: with two, the other's first update may
// reach the pservers before this one pulls (async mode).
TEST(OwnDataE2eTest, AsyncExecutorTrainersStartFromPaddlesValues) {
  const std::string dir = TempDir("async_params");
  Result r = Oar("launch --pservers 2 --trainers 1 --async --program " + kCtr + "/main.pb --startup " + kCtr +
                 "/startup.pb --params " + kCtr + "/params --loss_name mean_3.tmp_0 --data_feed " + kCtrData +
                 "/data.desc --files '" + kCtrData + "/part-*' --step_log_dir " + dir + " --test_files " + kCtrData +
                 "/part-1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GT(ValueAfter(r.out, "test_loss="), 0.3) << r.out;  // trainer 0 evaluated the program (ln 2 = 0.69 untrained)
  const auto t0 = ReadSteps(dir + "/trainer.0.steps");
  const auto want = ReadSteps(kCtr + "/losses.txt");
  ASSERT_EQ(t0.size(), 4u) << r.out;  // two files of 32 lines, batch 16
  EXPECT_NEAR(t0[0], want[0], 1e-5 * want[0]);
}

// Four files of 16 lines over three trainers: trainer 0 reads files 0 and
// 3 (32 lines), the others one file each (16).
TEST(OwnDataE2eTest, UnevenFileSharesKeepTheJobsGuarantees) {
  const std::string dir = TempDir("uneven");
  std::vector<std::string> lines;
  for (const char* part : {"/part-0", "/part-1"}) {
    std::ifstream in(kCtrData + part);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 64u);
  for (int f = 0; f < 4; ++f) {
    std::ofstream out(dir + "/part-" + std::to_string(f));
    for (int i = 0; i < 16; ++i) out << lines[static_cast<size_t>(f * 16 + i)] << "\n";
  }
  const std::string args = "--program " + kCtr + "/main.pb --startup " + kCtr + "/startup.pb --params " + kCtr +
                           "/params --feed_names slot0,slot1,slot2,slot3,dense,label --loss_name mean_3.tmp_0 "
                           "--batch_size 24 --epochs 2 --data_feed " +
                           kCtrData +
                           "/data.desc --dataset in_memory "
                           "--files '" +
                           dir + "/part-*' --step_log_dir " + dir;
  // Sync pserver: trainer 0 takes 4 steps an epoch, the others 2; the job
  // completes (the pservers stop counting a trainer that said COMPLETE).
  Result sync = Oar("launch --pservers 1 --trainers 3 " + args);
  ASSERT_EQ(sync.code, 0) << sync.out;
  EXPECT_EQ(ReadSteps(dir + "/trainer.0.steps").size(), 8u) << sync.out;
  EXPECT_EQ(ReadSteps(dir + "/trainer.2.steps").size(), 4u) << sync.out;
  for (int t = 0; t < 3; ++t) std::filesystem::remove(dir + "/trainer." + std::to_string(t) + ".steps");
  // nccl2: all take the fewest steps (2 an epoch), and the summary says what
  // trainer 0 left unused (16 lines an epoch).
  Result nccl2 = Oar("launch --mode nccl2 --trainers 3 " + args);
  ASSERT_EQ(nccl2.code, 0) << nccl2.out;
  for (int t = 0; t < 3; ++t) EXPECT_EQ(ReadSteps(dir + "/trainer." + std::to_string(t) + ".steps").size(), 4u) << t;
  EXPECT_NE(nccl2.out.find("examples left unused so every trainer stopped at the same step: trainer 0: 32"),
            std::string::npos)
      << nccl2.out;
}

// --shuffle global over MultiSlot files: the trainers deal their lines
// across each other (nccl2 trainers over their communicator; a pserver
// job's over a ring they join for it) before training; every line is
// trained or reported unused, each epoch.
TEST(OwnDataE2eTest, GlobalShuffleOfMultiSlotFilesInBothModes) {
  const std::string dir = TempDir("global_shuffle");
  const std::string args = Ctr(dir) + "--dataset in_memory --shuffle global --epochs 2 --batch_size 12";
  Result r = Oar("launch --mode nccl2 --trainers 3 " + args);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("shuffled globally"), std::string::npos) << r.out;
  // 64 lines, 2 epochs: what the trainers trained plus what they left unused.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("trained on ([0-9]+) examples"))) << r.out;
  const int64_t trained = std::stoll(m[1]);
  int64_t unused = 0;
  const size_t line = r.out.find("left unused so every trainer stopped at the same step:");
  if (line != std::string::npos) {
    const std::string text = r.out.substr(line, r.out.find('\n', line) - line);
    const std::regex each("trainer [0-9]+: ([0-9]+)");
    for (std::sregex_iterator i(text.begin(), text.end(), each), e; i != e; ++i) {
      unused += std::stoll((*i)[1]);
    }
  }
  EXPECT_EQ(trained + unused, 128) << r.out;
  // A pserver job: no step agreement, so every line is trained, each epoch.
  Result pserver = Oar("launch --pservers 1 --trainers 2 " + args);
  ASSERT_EQ(pserver.code, 0) << pserver.out;
  EXPECT_NE(pserver.out.find("shuffled globally"), std::string::npos) << pserver.out;
  EXPECT_NE(pserver.out.find("trained on 128 examples"), std::string::npos) << pserver.out;
}

}  // namespace
}  // namespace oar
