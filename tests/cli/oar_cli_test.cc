// Runs the real `oar` binary as a user would and checks what it prints and
// its exit code.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_split.h"
#include "common/program_desc.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

struct Result {
  int code;
  std::string out;  // stdout and stderr
};

Result Oar(const std::string& args) {
  std::string cmd = std::string(OAR_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string TempDir(const std::string& tag) {
  auto d = std::filesystem::temp_directory_path() / ("oar_cli_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

TEST(OarCliTest, HelpListsCommandsAndEachCommandsFlags) {
  Result r = Oar("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* c : {"train", "export", "inspect"}) EXPECT_NE(r.out.find(c), std::string::npos);
  Result t = Oar("train --help");
  EXPECT_EQ(t.code, 0);
  EXPECT_NE(t.out.find("--batch_size"), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("--out "), std::string::npos) << "export's flag leaked into train --help";
  EXPECT_EQ(Oar("export --help").code, 0);
  EXPECT_EQ(Oar("inspect --help").code, 0);
}

TEST(OarCliTest, TrainsOnASliceOfFashionMnistAndReportsAccuracy) {
  Result r = Oar("train --epochs 1 --limit 3000 --batch-size 100");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("epoch 1/1"), std::string::npos);
  size_t at = r.out.find("test_accuracy=");
  ASSERT_NE(at, std::string::npos) << r.out;
  double acc = std::stod(r.out.substr(at + 14));
  EXPECT_GT(acc, 0.6) << "3000 examples of Fashion-MNIST should beat chance by far";
}

TEST(OarCliTest, BadInputIsAOneLineErrorAndNonZeroExit) {
  for (const char* args : {"train --model nope", "train --data_dir /nonexistent/dir",
                           "train --optimizer rmsprop", "train --epochs 0", "frobnicate"}) {
    Result r = Oar(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.out.find("error"), std::string::npos) << args << ": " << r.out;
  }
  Result missing = Oar("train --data_dir /nonexistent/dir");
  EXPECT_NE(missing.out.find("/nonexistent/dir/train-images-idx3-ubyte.gz"), std::string::npos);
  EXPECT_EQ(std::count(missing.out.begin(), missing.out.end(), '\n'), 1) << missing.out;
}

TEST(OarCliTest, ExportWritesProgramsThatInspectPrints) {
  std::string dir = TempDir("export");
  Result e = Oar("export --model fashion_mlp --out " + dir);
  ASSERT_EQ(e.code, 0) << e.out;
  Result i = Oar("inspect " + dir + "/main.pb");
  ASSERT_EQ(i.code, 0) << i.out;
  EXPECT_NE(i.out.find("mul(X=[x], Y=[fc_0.w_0]) -> (Out=[fc_0.tmp_0])"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("adam("), std::string::npos);
  EXPECT_NE(i.out.find("fc_0.w_0 : LOD_TENSOR float32[784, 256] persistable"), std::string::npos);
  Result s = Oar("inspect " + dir + "/startup.pb");
  EXPECT_NE(s.out.find("uniform_random"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(OarCliTest, InspectRejectsMalformedFilesAndUnknownOps) {
  std::string dir = TempDir("inspect");
  std::ofstream(dir + "/junk.pb") << "definitely not protobuf";
  Result junk = Oar("inspect " + dir + "/junk.pb");
  EXPECT_NE(junk.code, 0);
  EXPECT_NE(junk.out.find("not a serialized ProgramDesc"), std::string::npos) << junk.out;

  ProgramDesc p;
  OpDesc* op = p.MutableBlock(0)->AppendOp();
  op->type = "warp_drive";
  std::ofstream(dir + "/unknown.pb", std::ios::binary) << p.Serialize();
  Result unknown = Oar("inspect " + dir + "/unknown.pb");
  EXPECT_NE(unknown.code, 0);
  EXPECT_NE(unknown.out.find("block 0, op #0: unknown op type 'warp_drive'"), std::string::npos) << unknown.out;

  EXPECT_NE(Oar("inspect " + dir + "/absent.pb").code, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace oar

namespace oar {
namespace {

TEST(OarCliTest, SaveWritesACheckpointThatResumeLoads) {
  std::string dir = TempDir("ckpt");
  Result a = Oar("train --epochs 1 --limit 1000 --save " + dir);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/__manifest__"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/fc_0.w_0"));
  Result b = Oar("train --epochs 1 --limit 1000 --resume " + dir);
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("resumed from"), std::string::npos);
  Result c = Oar("train --model fashion_cnn --epochs 1 --limit 100 --resume " + dir);
  EXPECT_NE(c.code, 0);
  EXPECT_NE(c.out.find("--resume"), std::string::npos) << c.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace oar

namespace oar {
namespace {

TEST(OarCliTest, TrainsTheConvolutionalModelBriefly) {
  Result r = Oar("train --model fashion_cnn --epochs 1 --limit 512 --batch-size 64");
  ASSERT_EQ(r.code, 0) << r.out;
  size_t at = r.out.find("test_accuracy=");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_GT(std::stod(r.out.substr(at + 14)), 0.3) << "512 examples should already beat 10% chance";
}

}  // namespace
}  // namespace oar

namespace oar {
namespace {

TEST(OarCliTest, TrainsOnTwoPlaces) {
  Result r = Oar("train --epochs 1 --limit 2000 --places 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("training on 2 CPU places"), std::string::npos);
  EXPECT_NE(r.out.find("test_accuracy="), std::string::npos);
  EXPECT_NE(Oar("train --places -3").code, 0);
}

}  // namespace
}  // namespace oar
