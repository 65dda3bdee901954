// `oar async-train` as a user runs it: a program exported by `oar export`,
// MultiSlot files and a DataFeedDesc file written by hand, two threads; the
// summary counts every instance and the fetched loss is printed; a
// malformed line stops the run naming file and line, or is skipped and
// counted with --skip_bad_lines.
#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/oar_process.h"

namespace oar {
namespace {

class AsyncTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test: ctest runs the cases side by side.
    dir = ::testing::TempDir() + "/async_train_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(RunCommand("rm -rf " + dir + " && mkdir -p " + dir + "/data").code, 0);
    ASSERT_EQ(Oar("export --model fashion_mlp --out " + dir).code, 0);
    std::ofstream(dir + "/data.prototxt") << "name: 'MultiSlotDataFeed' batch_size: 16\n"
                                             "multi_slot_desc {\n"
                                             "  slots { name: 'x' type: 'float' is_dense: true is_used: true "
                                             "shape: [-1, 784] }\n"
                                             "  slots { name: 'label' type: 'uint64' is_used: true }\n}\n";
    for (int f = 0; f < 2; ++f) {
      std::ofstream out(dir + "/data/part-" + std::to_string(f));
      for (int i = 0; i < 40; ++i) {
        const int label = (i + f) % 10;
        out << 784;
        for (int k = 0; k < 784; ++k) out << ' ' << (k % 10 == label ? 0.9f : 0.1f * std::fabs(std::sin(k + i)));
        out << " 1 " << label << "\n";
      }
    }
  }
  std::string Args() const {
    return absl::StrCat("async-train --program ", dir, "/main.pb --startup ", dir, "/startup.pb --data_feed ", dir,
                        "/data.prototxt --files '", dir, "/data/part-*' --threads 2 --fetch mean_0.tmp_0");
  }
  std::string dir;
};

TEST_F(AsyncTrainTest, TrainsFromFilesWithTwoThreadsAndPrintsTheLoss) {
  Result r = Oar(Args());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("async-train: 80 instances"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 file(s), 2 thread(s)"), std::string::npos) << r.out;
  EXPECT_NE(("\n" + r.out).find("\nmean_0.tmp_0="), std::string::npos) << r.out;  // the last values, a line
  Result debug = Oar(Args() + " --debug");
  ASSERT_EQ(debug.code, 0) << debug.out;
  EXPECT_NE(debug.out.find("batch 1 thread "), std::string::npos) << debug.out;
}

TEST_F(AsyncTrainTest, AMalformedLineStopsTheRunOrIsSkipped) {
  std::ofstream(dir + "/data/part-1", std::ios::app) << "3 0.1 0.2 0.3 1 4\n";
  Result r = Oar(Args());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find(dir + "/data/part-1:41: slot 'x': a dense slot of width 784"), std::string::npos) << r.out;
  r = Oar(Args() + " --skip_bad_lines");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("async-train: 80 instances"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("skipped 1 malformed line(s)"), std::string::npos) << r.out;
  EXPECT_NE(Oar(Args() + " --pservers 127.0.0.1:6174").out.find("--pservers"), std::string::npos)
      << "not read: refused";
}

}  // namespace
}  // namespace oar
