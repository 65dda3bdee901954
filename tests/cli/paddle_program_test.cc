// `oar train --program` on a program PaddlePaddle 2.6 wrote
// (tests/testdata/paddle/fashion_mlp, by tests/paddle_fixtures/
// make_fixtures.py), as the README shows: unmodified, from Paddle's own
// initial parameters (its combined save_persistables file), on
// Fashion-MNIST; it learns, and every misuse is a clear error.
#include <filesystem>
#include <string>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "tests/util/oar_process.h"

namespace oar {
namespace {

const std::string kFixture = OAR_TESTDATA_DIR "/paddle/fashion_mlp";
const std::string kArgs = "train --program " + kFixture + "/main.pb --startup " + kFixture +
                          "/startup.pb --feed_names x,label --loss_name mean_1.tmp_0 ";


TEST(PaddleProgramTest, TrainsAPaddleWrittenProgramFromPaddlesParameters) {
  Result r = Oar(kArgs + "--params " + kFixture + "/params --fetch accuracy_0.tmp_2 --epochs 1 --limit 6000");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("from " + kFixture + "/params"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("6000 examples"), std::string::npos) << r.out;
  EXPECT_GT(ValueAfter(r.out, "test_accuracy_0.tmp_2="), 0.6) << r.out;  // chance is 0.1
  EXPECT_LT(ValueAfter(r.out, "test_loss="), 1.5) << r.out;               // ln 10 = 2.30 untrained
}

// Parameters of another network under this one's names: the mlp fixture's
// (64 inputs), with its Adam moments standing in for Momentum's velocities.
std::string OtherNetworksParams() {
  namespace fs = std::filesystem;
  const fs::path dir = TempDir("other_params");
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(OAR_TESTDATA_DIR "/paddle/mlp/params")) {
    std::string name = e.path().filename().string();
    fs::copy_file(e.path(), dir / name, fs::copy_options::overwrite_existing);
    if (const size_t at = name.find("_moment1_0"); at != std::string::npos) {
      fs::copy_file(e.path(), dir / (name.substr(0, at) + "_velocity_0"), fs::copy_options::overwrite_existing);
    }
  }
  return dir.string();
}

// Every committed Paddle-written program passes `oar inspect`'s checks
// (each op known, its slots and attributes ones Oar implements).
TEST(PaddleProgramTest, EveryFixturePassesInspect) {
  int programs = 0;
  for (const auto& dir : std::filesystem::directory_iterator(OAR_TESTDATA_DIR "/paddle")) {
    for (const char* file : {"/main.pb", "/startup.pb"}) {
      Result r = Oar("inspect " + dir.path().string() + file);
      EXPECT_EQ(r.code, 0) << dir.path() << file << "\n" << r.out.substr(r.out.size() > 2000 ? r.out.size() - 2000 : 0);
      ++programs;
    }
  }
  EXPECT_GE(programs, 16);  // 8 fixtures
}

TEST(PaddleProgramTest, MisuseIsAClearError) {
  const struct {
    std::string args, want;
  } cases[] = {
      {kArgs + "--lr 0.1", "--lr does not apply to --program"},
      {kArgs + "--params /nonexistent/params", "--params /nonexistent/params"},
      {kArgs + "--params " OAR_TESTDATA_DIR "/paddle/mlp/params",  // Adam's files, not Momentum's
       "cannot open " OAR_TESTDATA_DIR "/paddle/mlp/params/fc_0.b_0_velocity_0"},
      {kArgs + "--params " + OtherNetworksParams(), "'fc_0.w_0' is [64, 32] there, but the program declares [784, 32]"},
      {kArgs + "--fetch nope", "main.pb has no variable 'nope'"},
      {"train --program " + kFixture + "/main.pb --startup " + kFixture + "/startup.pb",
       "--program needs --loss_name LOSS and --feed_names IMAGE,LABEL"},
  };
  for (const auto& c : cases) {
    Result r = Oar(c.args + " --limit 100 --epochs 1");
    EXPECT_NE(r.code, 0) << c.args;
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace oar
