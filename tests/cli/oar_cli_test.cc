// Runs the real `oar` binary as a user would and checks what it prints and
// its exit code.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_split.h"
#include "common/framework/program_desc.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/util/oar_process.h"

namespace oar {
namespace {

TEST(OarCliTest, HelpListsCommandsAndEachCommandsFlags) {
  Result r = Oar("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* c : {"train", "export", "inspect", "transpile"}) EXPECT_NE(r.out.find(c), std::string::npos);
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
  for (const char* args : {"train --model nope", "train --data_dir /nonexistent/dir", "train --optimizer rmsprop",
                           "train --epochs 0", "frobnicate"}) {
    Result r = Oar(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.out.find("error"), std::string::npos) << args << ": " << r.out;
  }
  Result missing = Oar("train --data_dir /nonexistent/dir");
  EXPECT_NE(missing.out.find("/nonexistent/dir/train-images-idx3-ubyte.gz"), std::string::npos);
  EXPECT_EQ(std::count(missing.out.begin(), missing.out.end(), '\n'), 1) << missing.out;
}

// A host without a GPU (CI's): --device gpu is one line naming why, before
// any data is read. (On a GPU host the gpu tests train there instead.)
TEST(OarCliTest, DeviceGpuWithoutAGpuIsAOneLineError) {
  Result probe = Oar("train --device gpu --data_dir /nonexistent/dir");
  if (probe.out.find("no GPU is visible") == std::string::npos &&
      probe.out.find("/nonexistent/dir") != std::string::npos) {
    GTEST_SKIP() << "this host has a GPU";
  }
  EXPECT_NE(probe.code, 0);
  EXPECT_NE(probe.out.find("--device gpu: no GPU is visible to this process"), std::string::npos) << probe.out;
  EXPECT_EQ(std::count(probe.out.begin(), probe.out.end(), '\n'), 1) << probe.out;
  Result several = Oar("train --device gpu --places 2 --data_dir /nonexistent/dir");
  EXPECT_NE(several.code, 0);
  EXPECT_NE(several.out.find("--device gpu: no GPU is visible to this process"), std::string::npos) << several.out;
  EXPECT_EQ(std::count(several.out.begin(), several.out.end(), '\n'), 1) << several.out;
  Result bad = Oar("train --device tpu");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--device 'tpu': use cpu or gpu"), std::string::npos) << bad.out;
  Result launch = Oar("launch --device gpu --trainers 2 --data_dir /nonexistent/dir");
  EXPECT_NE(launch.code, 0);
  EXPECT_NE(launch.out.find("--device gpu: no GPU is visible to this process"), std::string::npos) << launch.out;
  EXPECT_EQ(std::count(launch.out.begin(), launch.out.end(), '\n'), 1) << launch.out;
  Result run =
      RunCommand("PADDLE_TRAINING_ROLE=TRAINER " + OarBinary() +
                 " run --device gpu --trainers 1 --trainer_id 0 --pservers 127.0.0.1:1 --data_dir /nonexistent/dir");
  EXPECT_NE(run.code, 0);
  EXPECT_NE(run.out.find("no GPU is visible"), std::string::npos) << run.out;
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
  EXPECT_NE(i.out.find("op(s) in 1 block(s), each of a type, slots and attributes Oar runs"), std::string::npos)
      << i.out;
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

  // Every refusal in one run, grouped by op type and reason with counts.
  ProgramDesc p;
  BlockDesc* b = p.MutableBlock(0);
  for (int i = 0; i < 2; ++i) b->AppendOp()->type = "warp_drive";
  OpDesc* relu = b->AppendOp();
  relu->type = "relu";
  relu->inputs = {{"X", {"x"}}, {"Gain", {"g"}}, {"AxisTensor", {}}};  // an empty slot is not given
  relu->outputs = {{"Out", {"y"}}};
  OpDesc* pool = b->AppendOp();
  pool->type = "pool2d";
  pool->inputs = {{"X", {"y"}}};
  pool->outputs = {{"Out", {"z"}}};
  pool->attrs["data_format"] = std::string("NHWC");
  b->AppendOp()->type = "warp_drive";
  std::ofstream(dir + "/unknown.pb", std::ios::binary) << p.Serialize();
  Result unknown = Oar("inspect " + dir + "/unknown.pb");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(
      unknown.out.find("unknown.pb: Oar cannot run 5 op(s) of this program, for 3 reason(s):\n"
                       "  warp_drive (x3, first at block 0, op #0): Oar has no such op\n"
                       "  relu (x1, first at block 0, op #2): input slot 'Gain' is bound to 'g', and Oar's relu "
                       "has no such slot (it reads: X)\n"
                       "  pool2d (x1, first at block 0, op #3): attribute data_format=\"NHWC\" is not implemented"),
      std::string::npos)
      << unknown.out;
  // --ops: the op types it uses, their kernels, and why each is refused.
  Result ops = Oar("inspect --ops " + dir + "/unknown.pb");
  EXPECT_EQ(ops.code, 1);
  EXPECT_NE(ops.out.find("warp_drive      3  no   no   3x Oar has no such op"), std::string::npos) << ops.out;
  // (The GPU column says yes only where the build has CUDA.)
  EXPECT_NE(ops.out.find("relu            1  yes  "), std::string::npos) << ops.out;
  EXPECT_NE(ops.out.find("  1x input slot 'Gain' is bound to 'g'"), std::string::npos) << ops.out;
  Result all = Oar("inspect --ops");
  EXPECT_EQ(all.code, 0);
  EXPECT_NE(all.out.find("\nmul "), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("\nsend "), std::string::npos) << all.out;

  EXPECT_NE(Oar("inspect " + dir + "/absent.pb").code, 0);
  Result folder = Oar("inspect " + dir);  // read as an empty file, it was "program has no blocks"
  EXPECT_EQ(folder.code, 1) << folder.out;
  EXPECT_NE(folder.out.find(dir + " is a folder, not a file"), std::string::npos) << folder.out;
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
  EXPECT_NE(c.out.find("--resume: " + dir + " is not a checkpoint of this program: it lacks "), std::string::npos)
      << c.out;
  EXPECT_NE(c.out.find("was it saved from another model?"), std::string::npos) << c.out;
  // Adam's state, resumed with SGD: the parameters load, the rest is named.
  Result sgd = Oar("train --optimizer sgd --epochs 1 --limit 100 --resume " + dir);
  ASSERT_EQ(sgd.code, 0) << sgd.out;
  EXPECT_NE(sgd.out.find("note: --resume left out 24 variable(s) of the checkpoint that this program does not have "
                         "(fc_0.b_0_beta1_pow_acc_0, "),
            std::string::npos)
      << sgd.out;
  // A --save folder that cannot be made is said before training, not after
  // the first epoch; a --resume folder that is not there is said so.
  Result d = Oar("train --epochs 1 --limit 1000 --save " + dir + "/fc_0.w_0/sub");
  EXPECT_EQ(d.code, 1) << d.out;
  EXPECT_NE(d.out.find("--save " + dir + "/fc_0.w_0/sub: cannot write there"), std::string::npos) << d.out;
  EXPECT_EQ(d.out.find("epoch 1/1"), std::string::npos) << d.out;
  Result e = Oar("train --epochs 1 --limit 100 --resume " + dir + "/absent");
  EXPECT_EQ(e.code, 1) << e.out;
  EXPECT_NE(e.out.find(dir + "/absent is not a folder"), std::string::npos) << e.out;
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

namespace oar {
namespace {

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> JsonOps(const nlohmann::json& program, size_t block = 0) {
  return program["blocks"][block]["ops"].get<std::vector<std::string>>();
}

TEST(OarCliTest, TranspileWritesEveryProgramAndAJsonSummary) {
  const std::string eps = "127.0.0.1:6174,127.0.0.1:6175";
  const std::string dir = TempDir("transpile_a"), again = TempDir("transpile_b");
  Result r = Oar("transpile --pservers " + eps + " --trainers 2 --trainer-id 1 --out " + dir + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["mode"], "pserver");
  EXPECT_EQ(j["trainer_id"], 1);
  // What Fluid's transpiler sets on the trainer's Program object.
  EXPECT_EQ(j["trainer"]["is_distributed"], true);
  EXPECT_EQ(j["trainer"]["is_chief"], false);
  EXPECT_EQ(j["trainer"]["endpoints"], (std::vector<std::string>{"127.0.0.1:6174", "127.0.0.1:6175"}));
  EXPECT_TRUE(j["trainer"]["distributed_lookup_table"].is_null());
  const auto ops = JsonOps(j["trainer"]["main"]);
  for (const char* want : {"split_byref", "send", "send_barrier", "recv", "fetch_barrier", "concat"}) {
    EXPECT_NE(std::find(ops.begin(), ops.end(), want), ops.end()) << want;
  }
  EXPECT_EQ(std::find(ops.begin(), ops.end(), "adam"), ops.end()) << "the optimizer runs on the pservers";
  ASSERT_EQ(j["pservers"].size(), 2u);
  for (const auto& ps : j["pservers"]) {
    EXPECT_EQ(JsonOps(ps["main"]), std::vector<std::string>{"listen_and_serv"});
    EXPECT_GE(ps["main"]["blocks"].size(), 2u);
  }
  // The files hold the same programs, and a second process writes the same bytes.
  auto trainer = ProgramDesc::Parse(ReadBytes(dir + "/trainer.main.pb"));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_EQ((*trainer)->Block(0).OpSize(), ops.size());
  for (size_t i = 0; i < ops.size(); ++i) EXPECT_EQ((*trainer)->Block(0).Op(i).type, ops[i]);
  EXPECT_TRUE(std::filesystem::exists(dir + "/pserver_1.startup.pbtxt"));
  ASSERT_EQ(Oar("transpile --pservers " + eps + " --trainers 2 --trainer-id 1 --out " + again).code, 0);
  for (const char* f : {"trainer.main.pb", "trainer.startup.pb", "pserver_0.main.pb", "pserver_0.startup.pb",
                        "pserver_1.main.pb", "pserver_1.startup.pb"}) {
    EXPECT_EQ(ReadBytes(dir + "/" + f), ReadBytes(again + "/" + f)) << f;
    EXPECT_EQ(Oar(std::string("inspect ") + dir + "/" + f).code, 0) << f << " holds an op Oar cannot run";
  }
}

TEST(OarCliTest, TranspilesProgramFilesAndNamesBadArguments) {
  const std::string dir = TempDir("transpile_files");
  ASSERT_EQ(Oar("export --optimizer sgd --out " + dir).code, 0);
  Result r = Oar("transpile --program " + dir + "/main.pb --startup " + dir +
                 "/startup.pb --pservers 127.0.0.1:6174 --trainers 2 --async --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["sync"].get<bool>());
  const auto ops = JsonOps(j["trainer"]["main"]);
  EXPECT_EQ(std::find(ops.begin(), ops.end(), "send_barrier"), ops.end());
  EXPECT_EQ(JsonOps(j["pservers"][0]["main"], 1), std::vector<std::string>{"sgd"});

  Result both = Oar("transpile --sync --async --json");
  EXPECT_EQ(both.code, 1);
  EXPECT_NE(both.out.find("--sync and --async contradict"), std::string::npos) << both.out;
  Result id = Oar("transpile --trainers 2 --trainer-id 2 --json");
  EXPECT_EQ(id.code, 1);
  EXPECT_NE(id.out.find("trainer_id 2 is not in [0, 2)"), std::string::npos) << id.out;
  Result ep = Oar("transpile --pservers 127.0.0.1 --json");
  EXPECT_NE(ep.out.find("'127.0.0.1' is not host:port"), std::string::npos) << ep.out;
  Result missing = Oar("transpile --program /nonexistent/main.pb --startup x --json");
  EXPECT_NE(missing.out.find("cannot open /nonexistent/main.pb"), std::string::npos) << missing.out;
  Result nccl =
      Oar("transpile --mode nccl2 --trainer-endpoints 10.0.0.1:6170,10.0.0.2:6170 --current-endpoint "
          "10.0.0.2:6170 --trainer-id 1 --json");
  ASSERT_EQ(nccl.code, 0) << nccl.out;
  const auto startup = JsonOps(nlohmann::json::parse(nccl.out)["trainer"]["startup"]);
  EXPECT_EQ(startup.back(), "gen_nccl_id");
}

// Regression: every command took every flag of the binary, so `oar launch
// --mode nccl2` silently ran a pserver job. Now a flag a command does not
// read is an error naming it and the commands that do read it.
TEST(OarCliTest, ACommandRefusesAFlagItDoesNotRead) {
  Result t = Oar("train --mode nccl2 --epochs 1");
  EXPECT_NE(t.code, 0);
  EXPECT_NE(t.out.find("oar train does not read --mode"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("oar launch"), std::string::npos) << t.out;  // who does
  Result l = Oar("launch --trainers 2 --role TRAINER");
  EXPECT_NE(l.code, 0);
  EXPECT_NE(l.out.find("oar launch does not read --role"), std::string::npos) << l.out;
  Result e = Oar("export --out /tmp/x --rpc_deadline 10");
  EXPECT_NE(e.code, 0);
  EXPECT_NE(e.out.find("oar export does not read --rpc_deadline"), std::string::npos) << e.out;
  Result n = Oar("launch --mode nccl2 --pservers 2 --trainers 2");
  EXPECT_NE(n.code, 0);
  EXPECT_NE(n.out.find("--mode nccl2 has no pservers"), std::string::npos) << n.out;
  Result nosync = Oar("train --nosync");  // --noX names flag X
  EXPECT_NE(nosync.out.find("does not read --sync"), std::string::npos) << nosync.out;
  EXPECT_EQ(Oar("launch --help").code, 0);
}

}  // namespace
}  // namespace oar
