#include "common/api/io.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / ("oar_io_" + std::to_string(getpid()) + "_" +
                                                      ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
    {
      ProgramGuard g(&main_, &startup_);
      Var x = layers::data("x", {4});
      Var label = layers::data("label", {1}, DataType::kInt64);
      pred_ = layers::fc(layers::fc(x, 8, "relu"), 3, "softmax");
      loss_ = layers::mean(layers::cross_entropy(pred_, label));
      optimizer::Adam(0.01f).minimize(loss_);
    }
    ASSERT_TRUE(main_.status().ok()) << main_.status();
    ASSERT_TRUE(exe_.Run(startup_.desc(), &scope_).ok());
    for (int i = 0; i < 3; ++i) {  // move parameters and Adam state off their initial values
      ASSERT_TRUE(exe_.Run(main_.desc(), &scope_, Feed(), {}).ok());
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  FeedMap Feed() {
    return {{"x", MakeTensor<float>({2, 4}, {1, 2, 3, 4, -1, 0, 1, 2})},
            {"label", MakeTensor<int64_t>({2, 1}, {2, 0})}};
  }
  std::string Bytes(const Scope& s, const std::string& name) {
    const Tensor& t = s.FindVar(name)->Get<Tensor>();
    return std::string(static_cast<const char*>(t.raw_data()), t.nbytes());
  }

  UniqueNameGuard names_;
  std::string dir_;
  Program main_, startup_;
  Var pred_, loss_;
  Executor exe_;
  Scope scope_;
};

TEST_F(IoTest, PersistablesReloadBitIdenticalSeparateAndCombined) {
  for (const std::string& file : {std::string(), std::string("params")}) {
    ASSERT_TRUE(save_persistables(exe_, &scope_, dir_, main_.desc(), file).ok());
    Scope fresh;
    absl::Status st = load_persistables(exe_, &fresh, dir_, main_.desc(), file);
    ASSERT_TRUE(st.ok()) << st;
    std::vector<std::string> names = PersistableVarNames(main_.desc());
    EXPECT_GE(names.size(), 17u);  // 4 params, 4×4 Adam accumulators, learning rate
    for (const auto& n : names) EXPECT_EQ(Bytes(fresh, n), Bytes(scope_, n)) << n;
  }
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/fc_0.w_0"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/params"));
}

TEST_F(IoTest, TrainingContinuesIdenticallyAfterReload) {
  ASSERT_TRUE(save_persistables(exe_, &scope_, dir_, main_.desc()).ok());
  Scope fresh;
  ASSERT_TRUE(load_persistables(exe_, &fresh, dir_, main_.desc()).ok());
  auto a = exe_.Run(main_.desc(), &scope_, Feed(), {loss_.name()});
  auto b = exe_.Run(main_.desc(), &fresh, Feed(), {loss_.name()});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)[0].data<float>()[0], (*b)[0].data<float>()[0]);
  EXPECT_EQ(Bytes(fresh, "fc_1.w_0"), Bytes(scope_, "fc_1.w_0"));
}

TEST_F(IoTest, InferenceModelPredictsLikeTheTrainedProgram) {
  Program test = main_.clone(true);
  auto want = exe_.Run(test.desc(), &scope_, Feed(), {pred_.name()});
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(save_inference_model(dir_, {"x"}, {pred_.name()}, exe_, &scope_, main_.desc()).ok());
  Scope fresh;
  auto model = load_inference_model(dir_, exe_, &fresh);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->feed_names, std::vector<std::string>{"x"});
  EXPECT_EQ(model->fetch_names, std::vector<std::string>{pred_.name()});
  for (size_t i = 0; i < model->program->Block(0).OpSize(); ++i) {
    EXPECT_EQ(model->program->Block(0).Op(i).role(), 0) << model->program->Block(0).Op(i).type;
  }
  EXPECT_FALSE(model->program->Block(0).HasVar("fc_0.w_0_moment1_0"));  // no optimizer state
  auto got = exe_.Run(*model->program, &fresh, {{"x", Feed()["x"]}}, model->fetch_names);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(TensorToVector<float>((*got)[0]), TensorToVector<float>((*want)[0]));
}

TEST_F(IoTest, CheckpointNeedsItsManifestAndMatchingShapes) {
  ASSERT_TRUE(save_checkpoint(exe_, &scope_, dir_, main_.desc()).ok());
  Scope fresh;
  ASSERT_TRUE(load_checkpoint(exe_, &fresh, dir_, main_.desc()).ok());
  EXPECT_EQ(Bytes(fresh, "fc_0.w_0"), Bytes(scope_, "fc_0.w_0"));

  std::filesystem::remove(dir_ + "/__manifest__");
  absl::Status st = load_checkpoint(exe_, &fresh, dir_, main_.desc());
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("interrupted"), std::string::npos);

  ASSERT_TRUE(save_checkpoint(exe_, &scope_, dir_, main_.desc()).ok());
  Program other;
  {
    UniqueNameGuard names;
    Program startup;
    ProgramGuard g(&other, &startup);
    layers::fc(layers::data("x", {5}), 8);
  }
  st = load_checkpoint(exe_, &fresh, dir_, other.desc());
  EXPECT_NE(st.message().find("'fc_0.w_0' is float32[4,8], the program wants float32[5,8]"), std::string::npos) << st;
}

// A checkpoint of another model is refused before anything is read, saying
// what it lacks and what it holds instead; one holding more than the
// program (Adam's state, resumed with SGD) loads what the program has and
// names the rest.
TEST_F(IoTest, ACheckpointOfAnotherModelIsToldAsSuchAndWhatItHoldsBeyondTheProgramIsNamed) {
  ASSERT_TRUE(save_checkpoint(exe_, &scope_, dir_, main_.desc()).ok());
  Program deeper, sgd;
  {
    UniqueNameGuard names;
    Program startup;
    ProgramGuard g(&deeper, &startup);
    layers::fc(layers::fc(layers::fc(layers::data("x", {4}), 8, "relu"), 3, "relu"), 2);
  }
  Scope fresh;
  absl::Status st = load_checkpoint(exe_, &fresh, dir_, deeper.desc());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find(dir_ + " is not a checkpoint of this program: it lacks 2 of the program's 6 variables "
                                     "(fc_2.b_0, fc_2.w_0) and holds 17 it does not (fc_0.b_0_beta1_pow_acc_0, "),
            std::string::npos)
      << st;
  EXPECT_EQ(fresh.FindVar("fc_0.w_0"), nullptr) << "nothing is read from a checkpoint that does not fit";
  {
    UniqueNameGuard names;
    Program startup;
    ProgramGuard g(&sgd, &startup);
    Var pred = layers::fc(layers::fc(layers::data("x", {4}), 8, "relu"), 3, "softmax");
    optimizer::SGD(0.1f).minimize(
        layers::mean(layers::cross_entropy(pred, layers::data("label", {1}, DataType::kInt64))));
  }
  std::vector<std::string> left_out;
  st = load_checkpoint(exe_, &fresh, dir_, sgd.desc(), &left_out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(Bytes(fresh, "fc_1.w_0"), Bytes(scope_, "fc_1.w_0"));
  EXPECT_EQ(left_out.size(), 16u);  // 4 parameters x 4 Adam accumulators
  EXPECT_NE(std::find(left_out.begin(), left_out.end(), "fc_0.w_0_moment1_0"), left_out.end());
}

TEST_F(IoTest, LoadingACorruptFileIsAnErrorNamingIt) {
  ASSERT_TRUE(save_persistables(exe_, &scope_, dir_, main_.desc()).ok());
  std::ofstream(dir_ + "/fc_0.b_0", std::ios::trunc) << "garbage";
  Scope fresh;
  absl::Status st = load_persistables(exe_, &fresh, dir_, main_.desc());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("fc_0.b_0"), std::string::npos) << st;
}

}  // namespace
}  // namespace oar
