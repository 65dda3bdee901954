// The CTR path as a user runs it: `oar gen-ctr-data` writes MultiSlot
// files and their DataFeedDesc and says the planted model's AUC; `oar
// async-train --model ctr_dnn` trains on every example and reports the test
// AUC and loss (12 steps: no claim of learning here — that it learns is
// measured by hand in the closing note; AsyncExecutor's own tests compare
// its training with the plain Executor's); the Fashion-MNIST commands
// refuse ctr_dnn, pointing to async-train.
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/util/listen_socket.h"
#include "tests/util/oar_process.h"
#include "tests/util/run_group.h"

namespace oar {
namespace {

TEST(CtrTest, GeneratedDataTrainsCtrDnnAndReportsTheTestAuc) {
  const std::string dir = ::testing::TempDir() + "/ctr_test_data";
  std::filesystem::remove_all(dir);
  Result gen = Oar("gen-ctr-data --out " + dir + " --examples 20000 --files 2 --seed 3");
  ASSERT_EQ(gen.code, 0) << gen.out;
  for (const char* f : {"/train/part-00000", "/train/part-00001", "/test/part-00000", "/data_feed.prototxt"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + f)) << f;
  }
  const double planted = ValueAfter(gen.out, "planted_auc=");
  EXPECT_GT(planted, 0.7) << gen.out;
  EXPECT_LT(planted, 1.0) << gen.out;
  std::ifstream desc(dir + "/data_feed.prototxt");
  const std::string desc_text((std::istreambuf_iterator<char>(desc)), std::istreambuf_iterator<char>());
  EXPECT_NE(desc_text.find("batch_size: 64"), std::string::npos) << desc_text;
  Result train = Oar("async-train --model ctr_dnn --optimizer lazy_adam --lr 0.003 --data_feed " + dir +
                     "/data_feed.prototxt --files '" + dir + "/train/*' --test_files '" + dir +
                     "/test/*' --threads 1 --fetch " + "auc_0.tmp_0");
  ASSERT_EQ(train.code, 0) << train.out;
  EXPECT_NE(train.out.find("async-train: 20000 instances"), std::string::npos) << train.out;
  const double test_auc = ValueAfter(train.out, "test_auc=");
  EXPECT_GT(test_auc, 0.6) << train.out;  // 0.62 with this seed: it learned (chance is 0.5; the planted 0.905)
  EXPECT_LT(test_auc, 1.0) << train.out;
  const double test_loss = ValueAfter(train.out, "test_loss=");
  EXPECT_GT(test_loss, 0.0) << train.out;
  EXPECT_LT(test_loss, 1.0) << train.out;  // a 2-way cross-entropy that has not diverged
}

// A pserver job with the table distributed: 2 pservers, 2 trainers each
// running 2 AsyncExecutor threads over its half of the files; every example
// is trained on once, and trainer 0 predicts the test files through the
// pservers' table (its prefetch). That the distributed table computes what
// a local one does is checked value for value in
// transpiler/distributed_table_run_test.cc.
TEST(CtrTest, APserverJobTrainsCtrDnnWithItsTableOnThePservers) {
  const std::string dir = ::testing::TempDir() + "/ctr_dist_test_data";
  std::filesystem::remove_all(dir);
  ASSERT_EQ(Oar("gen-ctr-data --out " + dir + " --examples 20000 --files 4 --seed 5").code, 0);
  Result r =
      Oar("launch --pservers 2 --trainers 2 --async --model ctr_dnn_dist --optimizer lazy_adam --lr 0.003 "
          "--data_feed " +
          dir + "/data_feed.prototxt --files '" + dir + "/train/*' --test_files '" + dir + "/test/*' --threads 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("trained on 20000 examples"), std::string::npos) << r.out;
  // The same data, model and optimizer in one process (the local table's
  // twin, ctr_dnn, with as many threads): the job's AUC is that one's, up to
  // the noise of lock-free async updates.
  Result one = Oar("async-train --model ctr_dnn --optimizer lazy_adam --lr 0.003 --data_feed " + dir +
                   "/data_feed.prototxt --files '" + dir + "/train/*' --test_files '" + dir + "/test/*' --threads 4");
  ASSERT_EQ(one.code, 0) << one.out;
  const double test_auc = ValueAfter(r.out, "test_auc="), single_auc = ValueAfter(one.out, "test_auc=");
  EXPECT_GT(single_auc, 0.55) << one.out;  // it learns from one pass (0.5: chance; measured 0.58-0.59)
  // Measured 0.56 vs 0.58-0.59 alone; 0.537 vs 0.592 once in CI with
  // another job on the 2 cores, which starves one trainer's threads and
  // stales the others' updates (as ElasticLaunchE2eTest found): 0.07.
  EXPECT_NEAR(test_auc, single_auc, 0.07) << r.out << one.out;
  Result sync = Oar("launch --pservers 1 --trainers 1 --model ctr_dnn_dist --data_feed " + dir +
                    "/data_feed.prototxt --files '" + dir + "/train/*' --threads 2");
  EXPECT_NE(sync.code, 0);
  EXPECT_NE(sync.out.find("train with --async"), std::string::npos) << sync.out;
}

// ctr_dnn's table kept on the pservers as sliced blocks (is_sparse, not
// is_distributed) with Fluid 1.6's runtime_split_send_recv, which Oar
// refused: the transpiler inserts no split op and the send op cuts the
// table's SelectedRows gradient by the blocks' row ranges as it runs. A
// sync job is exact, so it must train as the same job with the split op
// does, to the printed digit. (The communicator's cut, async, is checked
// value for value in trainer/communicator_test.cc.)
TEST(CtrTest, ASlicedTablesGradientCutAtRunTimeTrainsAsTheSplitOpDoes) {
  const std::string dir = ::testing::TempDir() + "/ctr_runtime_split_data";
  std::filesystem::remove_all(dir);
  ASSERT_EQ(Oar("gen-ctr-data --out " + dir + " --examples 8000 --files 2 --seed 5").code, 0);
  const std::string job =
      "launch --pservers 2 --trainers 2 --threads 1 --model ctr_dnn --optimizer lazy_adam --lr 0.003 "
      "--data_feed " +
      dir + "/data_feed.prototxt --files '" + dir + "/train/*' --test_files '" + dir + "/test/*'";
  Result split_op = Oar(job);
  ASSERT_EQ(split_op.code, 0) << split_op.out;
  Result runtime = Oar(job + " --runtime_split_send_recv");
  ASSERT_EQ(runtime.code, 0) << runtime.out;
  for (const char* key : {"last loss ", "test_loss=", "test_auc="}) {
    const double want = ValueAfter(split_op.out, key), got = ValueAfter(runtime.out, key);
    EXPECT_GT(want, 0) << key << split_op.out;
    EXPECT_EQ(got, want) << key << runtime.out;
  }
}

// A table kept whole on every trainer (ctr_dnn's, 40 MB) does not suit the
// communicator (docs/parameter-server.md): each trainer says so once,
// naming the table, and trains on; the distributed table (ctr_dnn_dist)
// is not named.
TEST(CtrTest, TheCommunicatorPullingAWholeTableIsWarnedOfAndADistributedOneIsNot) {
  const std::string dir = TempDir("ctr_whole_table");
  ASSERT_EQ(Oar("gen-ctr-data --out " + dir + " --examples 2000 --files 2 --seed 5").code, 0);
  const std::string job =
      "launch --pservers 2 --trainers 2 --async --runtime_split_send_recv --threads 1 --data_feed " + dir +
      "/data_feed.prototxt --files '" + dir + "/train/*' --model ";
  const std::string warning = "the communicator pulls the embedding table 'SparseFeatFactors' (1000001 x 10, 40.0 MB)";
  Result whole = Oar(job + "ctr_dnn");
  ASSERT_EQ(whole.code, 0) << whole.out;
  for (const std::string who : {"[trainer.0] ", "[trainer.1] "}) {
    int said = 0;
    for (absl::string_view line : absl::StrSplit(whole.out, '\n')) {
      said += absl::StartsWith(line, who) && absl::StrContains(line, warning) ? 1 : 0;
    }
    EXPECT_EQ(said, 1) << who << whole.out;
  }
  Result dist = Oar(job + "ctr_dnn_dist");
  ASSERT_EQ(dist.code, 0) << dist.out;
  EXPECT_EQ(dist.out.find("the communicator pulls"), std::string::npos) << dist.out;
}

// The trainers of a --data_feed job split the file listing by index, so
// one given another listing would train on overlapping files or leave some
// out. Each runs as `oar run` with the PADDLE_* variables (as Kubernetes
// starts them), trainer 1 with half the files: the pserver refuses the
// second trainer to call, naming both listings, and the whole job stops.
TEST(CtrTest, DataFeedTrainersGivenDifferentFilesAreRefusedNamingTheDifference) {
  const std::string dir = TempDir("ctr_files_differ");
  ASSERT_EQ(Oar("gen-ctr-data --out " + dir + " --examples 4000 --files 4 --seed 5").code, 0);
  const HandedSocket ps = ListenForChild();
  const std::vector<std::string> run = {OarBinary(),
                                        "run",
                                        "--async",
                                        "--model=ctr_dnn_dist",
                                        "--optimizer=adagrad",
                                        "--threads=1",
                                        "--rpc_deadline=20000",
                                        "--data_feed=" + dir + "/data_feed.prototxt"};
  auto role = [&](const std::string& who, const std::string& role, const std::string& id, const std::string& files) {
    cli::ChildSpec spec{
        who,
        run,
        {{"PADDLE_TRAINING_ROLE", role}, {"PADDLE_TRAINERS_NUM", "2"}, {"PADDLE_PSERVER_ENDPOINTS", ps.endpoint()}}};
    spec.argv.push_back("--files=" + files);
    if (role == "PSERVER") {
      spec.env.push_back({"PADDLE_CURRENT_ENDPOINT", ps.endpoint()});
      spec.listen_fds.push_back(ps.fd);
    } else {
      spec.env.push_back({"PADDLE_TRAINER_ID", id});
    }
    return spec;
  };
  std::vector<ChildRun> runs =
      RunTogether({role("pserver", "PSERVER", "", dir + "/train/*"), role("trainer0", "TRAINER", "0", dir + "/train/*"),
                   role("trainer1", "TRAINER", "1", dir + "/train/part-0000[01]")},
                  120);
  Result r{0, ""};
  for (const ChildRun& c : runs) r.out += c.out;
  ASSERT_NE(runs[0].code, -1) << "the pserver did not stop: " << r.out;
  // Whichever trainer calls second is refused (and says so), the pserver
  // then stops the job; the message is the same line from either side.
  EXPECT_NE(r.out.find("files.count 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("files.count 4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("start every trainer with the same --data_feed, --files"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("data_feed.batch_size"), std::string::npos) << "the feeds agree: " << r.out;
  EXPECT_EQ(runs[0].code, 1) << r.out;
}

TEST(CtrTest, FashionCommandsRefuseCtrDnn) {
  Result r = Oar("train --model ctr_dnn");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("oar async-train --model ctr_dnn"), std::string::npos) << r.out;
  r = Oar("gen-ctr-data --out /tmp/x --files many");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--files 'many' is not a positive count"), std::string::npos) << r.out;
  r = Oar("gen-ctr-data --out /tmp/x --batch_size 0");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--batch_size must be at least 1"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace oar
