#include "common/api/optimizer.h"

#include "common/api/layers.h"
#include "common/api/unique_name.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

using Args = std::vector<std::string>;

struct Built {
  Program main, startup;
  Var loss;
  size_t backward_end = 0;
};

template <typename Opt>
void Build(Built* b, Opt opt) {
  ProgramGuard g(&b->main, &b->startup);
  Var x = layers::data("x", {4});
  Var label = layers::data("label", {1}, DataType::kInt64);
  b->loss = layers::mean(layers::cross_entropy(layers::fc(layers::fc(x, 5, "relu"), 3, "softmax"), label));
  opt.minimize(b->loss);
}

std::vector<const OpDesc*> OpsWithRole(const BlockDesc& blk, int32_t role) {
  std::vector<const OpDesc*> out;
  for (size_t i = 0; i < blk.OpSize(); ++i) {
    if (blk.Op(i).GetAttr<int32_t>("op_role") == role) out.push_back(&blk.Op(i));
  }
  return out;
}

TEST(OptimizerTest, SgdAppendsOneUpdatePerParamSortedByName) {
  UniqueNameGuard names;
  Built b;
  Build(&b, optimizer::SGD(0.01f));
  ASSERT_TRUE(b.main.status().ok()) << b.main.status();
  const BlockDesc& blk = b.main.desc().Block(0);
  auto opt = OpsWithRole(blk, 2);
  ASSERT_EQ(opt.size(), 4u);
  Args params;
  for (const OpDesc* op : opt) {
    EXPECT_EQ(op->type, "sgd");
    params.push_back(op->Input("Param")[0]);
    EXPECT_EQ(op->Output("ParamOut"), op->Input("Param"));
    EXPECT_EQ(op->Input("Grad")[0], op->Input("Param")[0] + "@GRAD");
    EXPECT_EQ(op->Input("LearningRate"), Args{"learning_rate_0"});
    EXPECT_EQ(op->GetAttr<Args>("op_role_var"), (Args{op->Input("Param")[0], op->Input("Grad")[0]}));
  }
  EXPECT_EQ(params, (Args{"fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"}));
  const VarDesc* lr = blk.FindVar("learning_rate_0");
  ASSERT_NE(lr, nullptr);
  EXPECT_TRUE(lr->persistable);
  EXPECT_EQ(lr->shape, (std::vector<int64_t>{1}));
  const BlockDesc& s = b.startup.desc().Block(0);
  const OpDesc& lr_init = s.Op(s.OpSize() - 1);
  EXPECT_EQ(lr_init.type, "fill_constant");
  EXPECT_EQ(lr_init.Output("Out"), Args{"learning_rate_0"});
  EXPECT_FLOAT_EQ(lr_init.GetAttr<float>("value"), 0.01f);
}

TEST(OptimizerTest, MomentumCreatesVelocityAccumulators) {
  UniqueNameGuard names;
  Built b;
  Build(&b, optimizer::Momentum(0.01f, 0.9f, true));
  ASSERT_TRUE(b.main.status().ok()) << b.main.status();
  auto opt = OpsWithRole(b.main.desc().Block(0), 2);
  ASSERT_EQ(opt.size(), 4u);
  EXPECT_EQ(opt[1]->type, "momentum");
  EXPECT_EQ(opt[1]->Input("Velocity"), Args{"fc_0.w_0_velocity_0"});
  EXPECT_EQ(opt[1]->Output("VelocityOut"), Args{"fc_0.w_0_velocity_0"});
  EXPECT_TRUE(opt[1]->GetAttr<bool>("use_nesterov"));
  EXPECT_FLOAT_EQ(opt[1]->GetAttr<float>("mu"), 0.9f);
  EXPECT_EQ(b.main.desc().Block(0).FindVar("fc_0.w_0_velocity_0")->shape, (std::vector<int64_t>{4, 5}));
}

TEST(OptimizerTest, AdamFollowsFluidLayout) {
  UniqueNameGuard names;
  Built b;
  Build(&b, optimizer::Adam(0.001f));
  ASSERT_TRUE(b.main.status().ok()) << b.main.status();
  const BlockDesc& blk = b.main.desc().Block(0);
  auto opt = OpsWithRole(blk, 2);
  // Four adam ops, then a pair of beta-power scale ops per parameter.
  ASSERT_EQ(opt.size(), 12u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(opt[i]->type, "adam");
  for (int i = 4; i < 12; ++i) EXPECT_EQ(opt[i]->type, "scale");
  const OpDesc& adam = *opt[1];
  EXPECT_EQ(adam.Input("Moment1"), Args{"fc_0.w_0_moment1_0"});
  EXPECT_EQ(adam.Input("Moment2"), Args{"fc_0.w_0_moment2_0"});
  EXPECT_EQ(adam.Input("Beta1Pow"), Args{"fc_0.w_0_beta1_pow_acc_0"});
  EXPECT_EQ(blk.FindVar("fc_0.w_0_beta1_pow_acc_0")->shape, (std::vector<int64_t>{1}));
  EXPECT_EQ(opt[6]->Input("X"), Args{"fc_0.w_0_beta1_pow_acc_0"});
  EXPECT_FLOAT_EQ(opt[6]->GetAttr<float>("scale"), 0.9f);
  // Startup fills beta1_pow with beta1.
  const BlockDesc& s = b.startup.desc().Block(0);
  bool found = false;
  for (size_t i = 0; i < s.OpSize(); ++i) {
    if (s.Op(i).Output("Out") == Args{"fc_0.w_0_beta1_pow_acc_0"}) {
      found = true;
      EXPECT_FLOAT_EQ(s.Op(i).GetAttr<float>("value"), 0.9f);
    }
  }
  EXPECT_TRUE(found);
}

TEST(OptimizerTest, CloneForTestKeepsOnlyTheForwardPass) {
  UniqueNameGuard names;
  Built b;
  Build(&b, optimizer::Adam(0.001f));
  Program test = b.main.clone(/*for_test=*/true);
  const BlockDesc& blk = test.desc().Block(0);
  EXPECT_EQ(blk.OpSize(), 8u);  // 2×(mul, add, act) + cross_entropy + mean
  for (size_t i = 0; i < blk.OpSize(); ++i) EXPECT_EQ(blk.Op(i).role() & 3, 0);
  EXPECT_FALSE(blk.HasVar("fc_0.w_0@GRAD"));
  EXPECT_TRUE(blk.HasVar("fc_0.w_0_moment1_0"));
  EXPECT_EQ(b.main.clone().desc().Block(0).OpSize(), b.main.desc().Block(0).OpSize());
}

TEST(OptimizerTest, ProgramsRoundTripThroughBytes) {
  UniqueNameGuard names;
  Built b;
  Build(&b, optimizer::Adam(0.001f));
  std::string bytes = b.main.desc().Serialize();
  auto parsed = ProgramDesc::Parse(bytes);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ((*parsed)->Serialize(), bytes);
  EXPECT_EQ((*parsed)->ToString(), b.main.desc().ToString());
}

}  // namespace
}  // namespace oar
