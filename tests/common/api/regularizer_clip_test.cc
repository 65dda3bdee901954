// Regularizers and gradient clips: the ops Fluid emits, and their effect on
// one SGD step computed by hand.
#include <cmath>

#include "common/api/clip.h"
#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/regularizer.h"
#include "common/api/unique_name.h"
#include "common/framework/executor.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

// y = mean(x·W) with W = [[1], [2]] and x = [[1, 3]]: dL/dW = xᵀ = [1, 3].
struct Net {
  UniqueNameGuard names;
  Program main, startup;
  Var loss;
  ParamAttr w_attr;
  Net() {
    w_attr.name = "w";
    w_attr.initializer = initializer::Constant(1.0f);
  }
  void Build(optimizer::Optimizer* opt) {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {2});
    loss = layers::mean(layers::fc(x, 1, "", w_attr, NoBias()));
    opt->minimize(loss);
    EXPECT_TRUE(main.status().ok()) << main.status();
  }
  std::vector<float> StepAndReadW() {
    Executor exe;
    Scope scope;
    EXPECT_TRUE(exe.Run(startup.desc(), &scope).ok());
    *scope.Var("w")->GetMutable<Tensor>() = MakeTensor<float>({2, 1}, {1, 2});
    auto out = exe.Run(main.desc(), &scope, {{"x", MakeTensor<float>({1, 2}, {1, 3})}}, {});
    EXPECT_TRUE(out.ok()) << out.status();
    return TensorToVector<float>(scope.FindVar("w")->Get<Tensor>());
  }
  std::vector<std::string> OptimizeOpTypes() const {
    std::vector<std::string> t;
    const BlockDesc& b = main.desc().Block(0);
    for (size_t i = 0; i < b.OpSize(); ++i)
      if (b.Op(i).role() == 2) t.push_back(b.Op(i).type);
    return t;
  }
};

TEST(RegularizerTest, L2DecayAddsScaledParamToTheGradient) {
  Net n;
  optimizer::SGD sgd(0.1f);
  sgd.set_regularization(regularizer::L2Decay(0.5f));
  n.Build(&sgd);
  EXPECT_EQ(n.OptimizeOpTypes(), (std::vector<std::string>{"scale", "sum", "sgd"}));
  std::vector<float> w = n.StepAndReadW();
  EXPECT_NEAR(w[0], 1 - 0.1f * (1 + 0.5f * 1), 1e-6);
  EXPECT_NEAR(w[1], 2 - 0.1f * (3 + 0.5f * 2), 1e-6);
}

TEST(RegularizerTest, ParamAttrL1DecayOverridesTheOptimizers) {
  Net n;
  n.w_attr.regularizer = regularizer::L1Decay(0.25f);
  optimizer::SGD sgd(0.1f);
  sgd.set_regularization(regularizer::L2Decay(100.0f));
  n.Build(&sgd);
  EXPECT_EQ(n.OptimizeOpTypes(), (std::vector<std::string>{"sign", "scale", "sum", "sgd"}));
  std::vector<float> w = n.StepAndReadW();
  EXPECT_NEAR(w[1], 2 - 0.1f * (3 + 0.25f), 1e-6);
  const OpDesc* sum = nullptr;
  const BlockDesc& b = n.main.desc().Block(0);
  for (size_t i = 0; i < b.OpSize(); ++i)
    if (b.Op(i).type == "sum") sum = &b.Op(i);
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->GetAttr<std::vector<std::string>>("op_role_var"), (std::vector<std::string>{"w", "w@GRAD"}));
}

TEST(GradientClipTest, ByValueClampsTheGradient) {
  Net n;
  n.w_attr.gradient_clip = GradientClipByValue(2.0f, -2.0f);
  optimizer::SGD sgd(0.1f);
  n.Build(&sgd);
  EXPECT_EQ(n.OptimizeOpTypes(), (std::vector<std::string>{"clip", "sgd"}));
  std::vector<float> w = n.StepAndReadW();
  EXPECT_NEAR(w[0], 1 - 0.1f * 1, 1e-6);
  EXPECT_NEAR(w[1], 2 - 0.1f * 2, 1e-6);  // 3 clipped to 2
}

TEST(GradientClipTest, ByNormRescalesToMaxNorm) {
  Net n;
  n.w_attr.gradient_clip = GradientClipByNorm(1.0f);
  optimizer::SGD sgd(0.1f);
  n.Build(&sgd);
  std::vector<float> w = n.StepAndReadW();
  const float norm = std::sqrt(10.0f);
  EXPECT_NEAR(w[0], 1 - 0.1f * 1 / norm, 1e-6);
  EXPECT_NEAR(w[1], 2 - 0.1f * 3 / norm, 1e-6);
}

TEST(GradientClipTest, ByGlobalNormScalesEveryGradientTogether) {
  UniqueNameGuard names;
  Program main, startup;
  {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {2});
    ParamAttr w;
    w.name = "w";
    w.initializer = initializer::Constant(1.0f);
    ParamAttr b;
    b.name = "b";
    b.initializer = initializer::Constant(0.0f);
    Var loss = layers::mean(layers::fc(x, 1, "", w, b));
    set_gradient_clip(GradientClipByGlobalNorm(1.0f));
    optimizer::SGD(0.1f).minimize(loss);
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  Executor exe;
  Scope scope;
  ASSERT_TRUE(exe.Run(startup.desc(), &scope).ok());
  ASSERT_TRUE(exe.Run(main.desc(), &scope, {{"x", MakeTensor<float>({1, 2}, {1, 3})}}, {}).ok());
  // Gradients: w [1, 3], b [1]; global norm sqrt(11) > 1.
  const float k = 1.0f / std::sqrt(11.0f);
  std::vector<float> w = TensorToVector<float>(scope.FindVar("w")->Get<Tensor>());
  EXPECT_NEAR(w[1], 1 - 0.1f * 3 * k, 1e-6);
  EXPECT_NEAR(scope.FindVar("b")->Get<Tensor>().data<float>()[0], -0.1f * k, 1e-6);
}

template <typename Opt>
std::vector<std::string> AccumulatorsOf(Opt opt) {
  Net n;
  n.Build(&opt);
  std::vector<std::string> acc;
  for (const auto& [name, v] : n.main.desc().Block(0).vars()) {
    if (v.persistable && name.rfind("w_", 0) == 0) acc.push_back(name);
  }
  return acc;
}

TEST(OptimizerFamilyTest, AccumulatorsHaveFluidNames) {
  using Names = std::vector<std::string>;
  EXPECT_EQ(AccumulatorsOf(optimizer::Adagrad(0.1f)), (Names{"w_moment_0"}));
  EXPECT_EQ(AccumulatorsOf(optimizer::DecayedAdagrad(0.1f)), (Names{"w_moment_0"}));
  EXPECT_EQ(AccumulatorsOf(optimizer::Adamax(0.1f)), (Names{"w_beta1_pow_acc_0", "w_inf_norm_0", "w_moment_0"}));
  EXPECT_EQ(AccumulatorsOf(optimizer::RMSProp(0.1f)), (Names{"w_mean_grad_0", "w_mean_square_0", "w_momentum_0"}));
  EXPECT_EQ(AccumulatorsOf(optimizer::Ftrl(0.1f)), (Names{"w_linear_0", "w_squared_0"}));
  EXPECT_EQ(AccumulatorsOf(optimizer::LarsMomentum(0.1f, 0.9f)), (Names{"w_velocity_0"}));
}

TEST(OptimizerFamilyTest, EachTrainsOneStepThroughTheExecutor) {
  auto check = [](auto opt, const std::string& type) {
    Net n;
    n.Build(&opt);
    std::vector<std::string> types = n.OptimizeOpTypes();
    EXPECT_NE(std::find(types.begin(), types.end(), type), types.end()) << type;
    std::vector<float> w = n.StepAndReadW();
    EXPECT_LT(w[1], 2.0f) << type << " did not move the weight against its gradient";
  };
  check(optimizer::Adagrad(0.1f), "adagrad");
  check(optimizer::DecayedAdagrad(0.1f), "decayed_adagrad");
  check(optimizer::Adamax(0.1f), "adamax");
  check(optimizer::RMSProp(0.1f, 0.9f, 1e-6f, 0.0f, true), "rmsprop");
  check(optimizer::Ftrl(0.1f), "ftrl");
  check(optimizer::LarsMomentum(0.1f, 0.9f), "lars_momentum");
}

}  // namespace
}  // namespace oar
