// The layers API must build what Fluid's Python layers build: same op types,
// slots, names and key attributes.
#include "common/api/layers.h"

#include <cmath>

#include "common/api/unique_name.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

using Args = std::vector<std::string>;

class LayersTest : public ::testing::Test {
 protected:
  UniqueNameGuard names_;
  Program main_, startup_;
};

TEST_F(LayersTest, FcBuildsMulBiasActivationWithFluidNames) {
  {
    ProgramGuard g(&main_, &startup_);
    Var x = layers::data("x", {784});
    Var h = layers::fc(x, 256, "relu");
    EXPECT_EQ(h.name(), "fc_0.tmp_2");
    EXPECT_EQ(h.shape(), (std::vector<int64_t>{-1, 256}));
  }
  ASSERT_TRUE(main_.status().ok()) << main_.status();
  const BlockDesc& b = main_.desc().Block(0);
  ASSERT_EQ(b.OpSize(), 3u);
  EXPECT_EQ(b.Op(0).type, "mul");
  EXPECT_EQ(b.Op(0).Input("X"), Args{"x"});
  EXPECT_EQ(b.Op(0).Input("Y"), Args{"fc_0.w_0"});
  EXPECT_EQ(b.Op(0).Output("Out"), Args{"fc_0.tmp_0"});
  EXPECT_EQ(b.Op(0).GetAttr<int32_t>("x_num_col_dims"), 1);
  EXPECT_EQ(b.Op(0).GetAttr<int32_t>("y_num_col_dims"), 1);
  EXPECT_EQ(b.Op(1).type, "elementwise_add");
  EXPECT_EQ(b.Op(1).Input("Y"), Args{"fc_0.b_0"});
  EXPECT_EQ(b.Op(1).GetAttr<int32_t>("axis"), 1);
  EXPECT_EQ(b.Op(2).type, "relu");
  EXPECT_EQ(b.Op(2).Output("Out"), Args{"fc_0.tmp_2"});
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(b.Op(i).GetAttr<int32_t>("op_role", -1), 0);

  EXPECT_EQ(b.FindVar("fc_0.w_0")->shape, (std::vector<int64_t>{784, 256}));
  EXPECT_TRUE(b.FindVar("fc_0.w_0")->persistable);
  EXPECT_EQ(b.FindVar("fc_0.b_0")->shape, (std::vector<int64_t>{256}));
  EXPECT_TRUE(b.FindVar("x")->stop_gradient);

  // Startup: Xavier-uniform weight, zero bias.
  const BlockDesc& s = startup_.desc().Block(0);
  ASSERT_EQ(s.OpSize(), 2u);
  EXPECT_EQ(s.Op(0).type, "uniform_random");
  EXPECT_EQ(s.Op(0).Output("Out"), Args{"fc_0.w_0"});
  EXPECT_NEAR(s.Op(0).GetAttr<float>("max"), std::sqrt(6.0 / (784 + 256)), 1e-6);
  EXPECT_EQ(s.Op(0).GetAttr<std::vector<int64_t>>("shape"), (std::vector<int64_t>{784, 256}));
  EXPECT_EQ(s.Op(1).type, "fill_constant");
  EXPECT_EQ(s.Op(1).GetAttr<float>("value", -1), 0.0f);
  EXPECT_TRUE(s.FindVar("fc_0.b_0")->persistable);
}

TEST_F(LayersTest, LossAndMetricLayersUseFluidOpsAndNames) {
  Var acc;
  {
    ProgramGuard g(&main_, &startup_);
    Var x = layers::data("x", {10});
    Var label = layers::data("label", {1}, DataType::kInt64);
    Var pred = layers::fc(x, 3, "softmax");
    Var loss = layers::mean(layers::cross_entropy(pred, label));
    EXPECT_EQ(loss.name(), "mean_0.tmp_0");
    EXPECT_EQ(loss.shape(), (std::vector<int64_t>{1}));
    acc = layers::accuracy(pred, label);
    Var sq = layers::square_error_cost(pred, pred);
    EXPECT_EQ(sq.name(), "square_error_cost_0.tmp_1");
  }
  ASSERT_TRUE(main_.status().ok()) << main_.status();
  std::vector<std::string> types;
  const BlockDesc& b = main_.desc().Block(0);
  for (size_t i = 0; i < b.OpSize(); ++i) types.push_back(b.Op(i).type);
  EXPECT_EQ(types, (Args{"mul", "elementwise_add", "softmax", "cross_entropy", "mean", "top_k", "accuracy",
                         "elementwise_sub", "square"}));
  EXPECT_EQ(b.Op(3).Output("Y"), Args{"cross_entropy_0.tmp_0"});
  EXPECT_EQ(b.Op(5).Output("Indices"), Args{"top_k_0.tmp_1"});
  EXPECT_EQ(acc.name(), "accuracy_0.tmp_0");
  EXPECT_EQ(b.FindVar("top_k_0.tmp_1")->dtype, DataType::kInt64);
  EXPECT_EQ(b.FindVar("accuracy_0.tmp_1")->dtype, DataType::kInt32);
}

TEST_F(LayersTest, MisuseRecordsOneClearErrorAndStopsBuilding) {
  {
    ProgramGuard g(&main_, &startup_);
    Var x = layers::data("x", {4});
    Var label = layers::data("label", {1}, DataType::kInt64);
    Var bad = layers::cross_entropy(x, layers::data("wide_label", {3}, DataType::kInt64));
    EXPECT_FALSE(bad.valid());
    Var after = layers::mean(bad);
    EXPECT_FALSE(after.valid());
  }
  ASSERT_FALSE(main_.status().ok());
  EXPECT_NE(main_.status().message().find("cross_entropy"), std::string::npos) << main_.status();
  EXPECT_NE(main_.status().message().find("must be 1 along the class axis"), std::string::npos) << main_.status();
}

TEST_F(LayersTest, ParamAttrNamesAndInitializesParameters) {
  {
    ProgramGuard g(&main_, &startup_);
    Var x = layers::data("x", {4});
    ParamAttr w;
    w.name = "my_w";
    w.initializer = initializer::Constant(0.5f);
    layers::fc(x, 2, "", w, NoBias());
  }
  ASSERT_TRUE(main_.status().ok());
  EXPECT_NE(main_.desc().Block(0).FindVar("my_w"), nullptr);
  EXPECT_EQ(main_.desc().Block(0).OpSize(), 1u);  // no bias op
  EXPECT_EQ(startup_.desc().Block(0).Op(0).GetAttr<float>("value"), 0.5f);
}

TEST_F(LayersTest, LayersNamingOneParameterShareItIfTheyAgreeOnIt) {
  {
    ProgramGuard g(&main_, &startup_);
    Var a = layers::data("a", {1}, DataType::kInt64, 1);
    Var b = layers::data("b", {1}, DataType::kInt64, 1);
    ParamAttr table;
    table.name = "shared_table";
    layers::embedding(a, {100, 8}, true, false, -1, table);
    layers::embedding(b, {100, 8}, true, false, -1, table);  // the same table
  }
  ASSERT_TRUE(main_.status().ok()) << main_.status();
  EXPECT_EQ(main_.desc().Block(0).Op(0).Input("W"), main_.desc().Block(0).Op(1).Input("W"));
  {
    ProgramGuard g(&main_, &startup_);
    Var c = layers::data("c", {1}, DataType::kInt64, 1);
    ParamAttr table;
    table.name = "shared_table";
    layers::embedding(c, {100, 4}, true, false, -1, table);  // another width: not the same parameter
  }
  EXPECT_NE(main_.status().message().find("'shared_table' already exists with another shape"), std::string::npos)
      << main_.status();
}

TEST_F(LayersTest, RandomSeedReachesInitializers) {
  startup_.set_random_seed(42);
  {
    ProgramGuard g(&main_, &startup_);
    layers::fc(layers::data("x", {4}), 2);
  }
  EXPECT_EQ(startup_.desc().Block(0).Op(0).GetAttr<int32_t>("seed"), 42);
}

}  // namespace
}  // namespace oar

namespace oar {
namespace {

TEST(InitializerTest, EmitFluidOpsAndAttributes) {
  UniqueNameGuard names;
  Program main, startup;
  {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {6});
    ParamAttr normal;
    normal.initializer = initializer::Normal(0.5f, 2.0f, 9);
    ParamAttr uniform;
    uniform.initializer = initializer::Uniform(-3.0f, 3.0f);
    ParamAttr xavier_normal;
    xavier_normal.initializer = initializer::Xavier(/*uniform=*/false);
    layers::fc(x, 4, "", normal, NoBias());
    layers::fc(x, 4, "", uniform, NoBias());
    layers::fc(x, 4, "", xavier_normal, NoBias());
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  const BlockDesc& s = startup.desc().Block(0);
  ASSERT_EQ(s.OpSize(), 3u);
  EXPECT_EQ(s.Op(0).type, "gaussian_random");
  EXPECT_FLOAT_EQ(s.Op(0).GetAttr<float>("mean"), 0.5f);
  EXPECT_FLOAT_EQ(s.Op(0).GetAttr<float>("std"), 2.0f);
  EXPECT_EQ(s.Op(0).GetAttr<int32_t>("seed"), 9);
  EXPECT_EQ(s.Op(1).type, "uniform_random");
  EXPECT_FLOAT_EQ(s.Op(1).GetAttr<float>("min"), -3.0f);
  EXPECT_EQ(s.Op(2).type, "gaussian_random");
  EXPECT_NEAR(s.Op(2).GetAttr<float>("std"), std::sqrt(2.0 / (6 + 4)), 1e-6);
  EXPECT_EQ(s.Op(2).GetAttr<int32_t>("dtype"), 5);
}

}  // namespace
}  // namespace oar
