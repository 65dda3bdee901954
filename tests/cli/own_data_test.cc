// `oar train --program` on a user's own data, as the README's "Train a
// Paddle program on your data" runs it: a program PaddlePaddle 2.6.2 wrote,
// from Paddle's saved values, on the examples Paddle trained on brought as
// numpy arrays (a directory of .npy, an .npz) and as MultiSlot files (a
// queue and an in-memory dataset) — per-step losses equal to Paddle's within
// 1e-5 — and bad data is an error naming where, with nothing trained.
// (tests/paddle_fixtures/make_data_fixtures.py wrote the data.)
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/npy_bytes.h"
#include "tests/util/oar_process.h"
#include "tests/util/own_data.h"
#include "tests/util/step_log.h"

namespace oar {
namespace {

std::string MlpArgs() {
  return "train --program " + kMlp + "/main.pb --startup " + kMlp + "/startup.pb --params " + kMlp +
         "/params --feed_names x,label --loss_name mean_1.tmp_0 --batch_size 16 --epochs 5 ";
}

std::string CtrArgs() {
  return "train --program " + kCtr + "/main.pb --startup " + kCtr + "/startup.pb --params " + kCtr +
         "/params --feed_names slot0,slot1,slot2,slot3,dense,label --loss_name mean_3.tmp_0 --batch_size 16 "
         "--epochs 5 --data_feed " +
         kCtrData + "/data.desc --files '" + kCtrData + "/part-*' ";
}

// Runs `args` with a step log; expects Paddle's 20 recorded losses.
void ExpectPaddlesLosses(const std::string& args, const std::string& fixture, const std::string& tag) {
  const std::string log = TempDir(tag) + "/steps.txt";
  Result r = Oar(args + " --step_log " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<double> got = ReadSteps(log), want = ReadSteps(fixture + "/losses.txt");
  ASSERT_EQ(got.size(), 20u) << r.out;
  ASSERT_EQ(want.size(), 20u);
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i])) << tag << " step " << i;
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::abs(want[i]));
  }
  std::printf("%s: max relative loss error vs Paddle %.3g over %zu steps\n", tag.c_str(), worst, got.size());
}

TEST(OwnDataTest, NpyDirectoryTrainsToPaddlesLosses) {
  ExpectPaddlesLosses(MlpArgs() + "--data npy:" + kMlpData + "/npy", kMlp, "npy_dir");
}

TEST(OwnDataTest, NpzTrainsToPaddlesLossesAndEvaluates) {
  ExpectPaddlesLosses(MlpArgs() + "--data npy:" + kMlpData + "/arrays.npz --prefetch 0", kMlp, "npz");
  Result r = Oar(MlpArgs() + "--data npy:" + kMlpData + "/arrays.npz --test_data npy:" + kMlpData +
                 "/npy --fetch mean_1.tmp_0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GT(ValueAfter(r.out, "test_loss="), 0) << r.out;
  EXPECT_NEAR(ValueAfter(r.out, "test_loss="), ValueAfter(r.out, "test_mean_1.tmp_0="), 1e-6) << r.out;
}

TEST(OwnDataTest, MultiSlotFilesTrainToPaddlesLosses) {
  ExpectPaddlesLosses(CtrArgs(), kCtr, "multislot_queue");
  ExpectPaddlesLosses(CtrArgs() + "--dataset in_memory", kCtr, "multislot_in_memory");
}

// --places 2: each batch split across two CPU places (ParallelExecutor, LoD
// batches split by sequence), their gradients all-reduced: the same steps.
TEST(OwnDataTest, TwoPlacesTrainToPaddlesLosses) {
  ExpectPaddlesLosses(MlpArgs() + "--data npy:" + kMlpData + "/npy --places 2", kMlp, "npy_places");
  ExpectPaddlesLosses(CtrArgs() + "--places 2", kCtr, "multislot_places");
}

// AsyncExecutor (one thread: the files in order, one pass) from Paddle's
// saved values: every batch's loss in the step log is Paddle's, and the
// program is evaluated on the test files.
TEST(OwnDataTest, AsyncTrainStartsFromPaddlesValuesAndLogsEveryBatch) {
  const std::string log = TempDir("async_train") + "/steps.txt";
  Result r = Oar("async-train --program " + kCtr + "/main.pb --startup " + kCtr + "/startup.pb --params " + kCtr +
                 "/params --loss_name mean_3.tmp_0 --data_feed " + kCtrData + "/data.desc --files '" + kCtrData +
                 "/part-*' --step_log " + log + " --test_files " + kCtrData + "/part-1 --fetch mean_3.tmp_0");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<double> got = ReadSteps(log), want = ReadSteps(kCtr + "/losses.txt");
  ASSERT_EQ(got.size(), 4u) << r.out;  // 64 lines, batch 16
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * want[i]) << "batch " << i;
  EXPECT_GT(ValueAfter(r.out, "test_loss="), 0.3) << r.out;                    // ln 2 = 0.69 untrained
  EXPECT_NEAR(ValueAfter(r.out, "mean_3.tmp_0="), got.back(), 1e-4) << r.out;  // the fetched value (4 digits read)
}

TEST(OwnDataTest, BadDataIsAnErrorNamingWhereAndNothingTrains) {
  const std::string dir = TempDir("bad_data");
  namespace fs = std::filesystem;
  struct Case {
    std::string name, args, want;
  };
  // Arrays: a copy of the good ones with one fault each.
  auto arrays = [&](const std::string& tag) {
    const std::string d = dir + "/" + tag;
    fs::create_directories(d);
    fs::copy_file(kMlpData + "/npy/x.npy", d + "/x.npy");
    fs::copy_file(kMlpData + "/npy/label.npy", d + "/label.npy");
    return d;
  };
  const std::string f64 = arrays("f64"), missing = arrays("missing"), wide = arrays("wide");
  WriteFile(f64 + "/label.npy", NpyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (64, 1), }",
                                         RawBytes(std::vector<double>(64, 1.0))));
  fs::remove(missing + "/label.npy");
  WriteFile(wide + "/x.npy", NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (64, 65), }",
                                      RawBytes(std::vector<float>(64 * 65, 0.5f))));
  // MultiSlot: the first file with its 7th line cut short.
  const std::string cut = dir + "/cut";
  {
    std::ifstream in(kCtrData + "/part-0");
    std::ofstream out(cut);
    std::string line;
    for (int i = 1; std::getline(in, line); ++i) out << (i == 7 ? line.substr(0, line.size() / 2) : line) << "\n";
  }
  const Case cases[] = {
      {"a float64 label", MlpArgs() + "--data npy:" + f64,
       "array " + f64 + "/label.npy for variable 'label': the data is float64, the variable int64"},
      {"a missing array", MlpArgs() + "--data npy:" + missing,
       missing + "/label.npy is missing: the feed variable 'label' reads it (" + missing + " has: x.npy)"},
      {"a shape that disagrees", MlpArgs() + "--data npy:" + wide,
       "array " + wide + "/x.npy for variable 'x': the data is [64, 65] (65 values per example)"},
      {"a short line", CtrArgs() + "--files " + cut, cut + ":7: "},
      {"a program variable npy cannot feed", CtrArgs().substr(0, CtrArgs().find("--data_feed")) + "--data npy:" + f64,
       "slot0.npy is missing"},
  };
  for (const Case& c : cases) {
    const std::string log = dir + "/steps.txt";
    fs::remove(log);
    Result r = Oar(c.args + " --step_log " + log);
    EXPECT_EQ(r.code, 1) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.name << ": " << r.out;
    // Refused before the first step (the short line is in the first batch).
    EXPECT_TRUE(ReadSteps(log).empty()) << c.name << ": " << r.out;
  }
}

}  // namespace
}  // namespace oar
