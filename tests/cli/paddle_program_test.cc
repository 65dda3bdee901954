// `oar train --program` on a program PaddlePaddle 2.6 wrote
// (tests/testdata/paddle/fashion_mlp, by tests/paddle_fixtures/
// make_fixtures.py), as the README shows: unmodified, from Paddle's own
// initial parameters (its combined save_persistables file), on
// Fashion-MNIST; it learns, and every misuse is a clear error.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "tests/util/need_tool.h"
#include "tests/util/oar_process.h"
#include "tests/util/step_log.h"

namespace oar {
namespace {

const std::string kFixture = TestdataDir() + "/paddle/fashion_mlp";
const std::string kArgs = "train --program " + kFixture + "/main.pb --startup " + kFixture +
                          "/startup.pb --feed_names x,label --loss_name mean_1.tmp_0 ";

// Spelt as the README and Paddle users write it: --feed, --loss, --data.
TEST(PaddleProgramTest, TrainsAPaddleWrittenProgramFromPaddlesParameters) {
  Result r = Oar("train --program " + kFixture + "/main.pb --startup " + kFixture +
                 "/startup.pb --feed x,label --loss mean_1.tmp_0 --data fashion_mnist --params " + kFixture +
                 "/params --fetch accuracy_0.tmp_2 --epochs 1 --limit 6000");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("from " + kFixture + "/params"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("6000 examples"), std::string::npos) << r.out;
  EXPECT_GT(ValueAfter(r.out, "test_accuracy_0.tmp_2="), 0.6) << r.out;  // chance is 0.1
  EXPECT_LT(ValueAfter(r.out, "test_loss="), 1.5) << r.out;              // ln 10 = 2.30 untrained
  // The first step starts from the saved values (trained three steps), not
  // from the startup program's draws: its loss differs from a fresh start's.
  const std::string dir = TempDir("params_first_step");
  const std::string args = "train --program " + kFixture + "/main.pb --startup " + kFixture +
                           "/startup.pb --feed x,label --loss mean_1.tmp_0 --max_steps 1 --limit 500 --step_log ";
  ASSERT_EQ(Oar(args + dir + "/saved.steps --params " + kFixture + "/params").code, 0);
  ASSERT_EQ(Oar(args + dir + "/fresh.steps").code, 0);
  const std::vector<double> saved = ReadSteps(dir + "/saved.steps"), fresh = ReadSteps(dir + "/fresh.steps");
  ASSERT_EQ(saved.size(), 1u);
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_GT(std::abs(saved[0] - fresh[0]), 1e-3) << saved[0] << " vs " << fresh[0];
}

// Parameters of another network under this one's names: the mlp fixture's
// (64 inputs), with its Adam moments standing in for Momentum's velocities.
std::string OtherNetworksParams() {
  namespace fs = std::filesystem;
  const fs::path dir = TempDir("other_params");
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(TestdataDir() + "/paddle/mlp/params")) {
    std::string name = e.path().filename().string();
    fs::copy_file(e.path(), dir / name, fs::copy_options::overwrite_existing);
    if (const size_t at = name.find("_moment1_0"); at != std::string::npos) {
      fs::copy_file(e.path(), dir / (name.substr(0, at) + "_velocity_0"), fs::copy_options::overwrite_existing);
    }
  }
  return dir.string();
}

// Every "loss=" value (training and test) that a run printed, in order.
std::vector<std::string> Losses(const std::string& out) {
  std::vector<std::string> v;
  for (size_t at = out.find("loss="); at != std::string::npos; at = out.find("loss=", at + 1)) {
    v.push_back(out.substr(at, out.find_first_of(" \n", at) - at));
  }
  return v;
}

// A python3 that has numpy, the converter's one need; "" if none.
std::string PythonWithNumpy() {
  for (const std::string py : {"/usr/bin/python3", "python3"}) {
    if (RunCommand(py + " -c 'import numpy'").code == 0) return py;
  }
  return "";
}

// paddle.static.save's pickled model.pdparams/.pdopt (the same values as the
// combined params file), converted by scripts/pdparams_to_fluid.py, train
// exactly as the save_persistables file does.
TEST(PaddleProgramTest, StaticSaveFilesConvertedTrainLikeSavePersistables) {
  const std::string py = PythonWithNumpy();
  OAR_NEED_TOOL(!py.empty(), "python3 with numpy (python3-numpy)");
  const std::string dir = TempDir("converted");
  Result conv =
      RunCommand(py + " " + SourceDir() + "/scripts/pdparams_to_fluid.py " + kFixture + "/model --out " + dir);
  ASSERT_EQ(conv.code, 0) << conv.out;
  EXPECT_NE(conv.out.find("wrote 9 variables"), std::string::npos) << conv.out;  // 4 params, 4 velocities, lr
  Result a = Oar(kArgs + "--params " + dir + " --epochs 1 --limit 1000");
  Result b = Oar(kArgs + "--params " + kFixture + "/params --epochs 1 --limit 1000");
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_FALSE(Losses(a.out).empty()) << a.out;
  EXPECT_EQ(Losses(a.out), Losses(b.out)) << a.out << "\n" << b.out;
  // And both are the saved values, not the startup program's draws.
  Result fresh = Oar(kArgs + "--epochs 1 --limit 1000");
  ASSERT_EQ(fresh.code, 0) << fresh.out;
  EXPECT_NE(Losses(fresh.out), Losses(b.out)) << fresh.out;
}

TEST(PaddleProgramTest, ConverterRefusesAPickleThatIsNotArrays) {
  const std::string py = PythonWithNumpy();
  OAR_NEED_TOOL(!py.empty(), "python3 with numpy (python3-numpy)");
  const std::string dir = TempDir("evil_pickle");
  // A pickle that would call os.system when loaded by plain pickle.load.
  Result make = RunCommand(py +
                           " -c \"import os, pickle; "
                           "open('" +
                           dir + "/m.pdparams', 'wb').write(pickle.dumps({'w': os.system}))\"");
  ASSERT_EQ(make.code, 0) << make.out;
  Result r =
      RunCommand(py + " " + SourceDir() + "/scripts/pdparams_to_fluid.py " + dir + "/m.pdparams --out " + dir + "/out");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("refusing posix.system"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/out")) << r.out;
}

// Every committed Paddle-written program passes `oar inspect`'s checks
// (each op known, its slots and attributes ones Oar implements).
TEST(PaddleProgramTest, EveryFixturePassesInspect) {
  int programs = 0;
  for (const auto& dir : std::filesystem::directory_iterator(TestdataDir() + "/paddle")) {
    for (const char* file : {"/main.pb", "/startup.pb"}) {
      Result r = Oar("inspect " + dir.path().string() + file);
      EXPECT_EQ(r.code, 0) << dir.path() << file << "\n" << r.out.substr(r.out.size() > 2000 ? r.out.size() - 2000 : 0);
      ++programs;
    }
  }
  EXPECT_GE(programs, 18);  // 9 fixtures
}

TEST(PaddleProgramTest, MisuseIsAClearError) {
  const struct {
    std::string args, want;
  } cases[] = {
      {kArgs + "--lr 0.1", "--lr does not apply to --program"},
      {kArgs + "--params /nonexistent/params", "--params /nonexistent/params"},
      {kArgs + "--params " + TestdataDir() + "/paddle/mlp/params",  // Adam's files, not Momentum's
       "cannot open " + TestdataDir() + "/paddle/mlp/params/fc_0.b_0_velocity_0"},
      {kArgs + "--params " + OtherNetworksParams(), "'fc_0.w_0' is [64, 32] there, but the program declares [784, 32]"},
      {kArgs + "--fetch nope", "main.pb has no variable 'nope'"},
      {kArgs + "--params " + kFixture + "/model.pdparams",
       "convert them with `python3 scripts/pdparams_to_fluid.py " + kFixture + "/model --out DIR`"},
      {kArgs + "--params " + kFixture + "/model", "is paddle.static.save's pickled format"},
      {"train --program " + kFixture + "/main.pb --startup " + kFixture + "/startup.pb",
       "--program needs --loss_name LOSS and --feed_names VAR,..."},
      {kArgs + "--data cifar10",
       "--data cifar10: give fashion_mnist, npy:DIR (one <variable>.npy per feed) or "
       "npy:FILE.npz"},
      {kArgs + "--data_feed x.desc", "--data_feed needs the training files: --files"},
      {kArgs + "--shuffle sometimes", "--shuffle sometimes: give none, local or global"},
      {kArgs + "--dataset in_memory", "--dataset applies to --data_feed"},
      {"train --program " + kFixture + "/main.pb --startup " + kFixture +
           "/startup.pb --feed_names x --loss_name "
           "mean_1.tmp_0",
       "--data fashion_mnist feeds two variables (the image, then the label); --feed_names names 1"},
  };
  for (const auto& c : cases) {
    Result r = Oar(c.args + " --limit 100 --epochs 1");
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace oar
