#include "common/api/backward.h"

#include "common/api/layers.h"
#include "common/api/unique_name.h"
#include "common/framework/executor.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

using Args = std::vector<std::string>;

std::vector<std::string> Types(const BlockDesc& b, size_t from) {
  std::vector<std::string> t;
  for (size_t i = from; i < b.OpSize(); ++i) t.push_back(b.Op(i).type);
  return t;
}

TEST(AppendBackwardTest, BuildsReverseGradOpsWithRolesAndRoleVars) {
  UniqueNameGuard names;
  Program main, startup;
  Var loss;
  std::vector<std::pair<Var, Var>> pg;
  size_t forward_ops = 0;
  {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {4});
    Var label = layers::data("label", {1}, DataType::kInt64);
    Var pred = layers::fc(layers::fc(x, 8, "relu"), 3, "softmax");
    loss = layers::mean(layers::cross_entropy(pred, label));
    forward_ops = main.desc().Block(0).OpSize();
    pg = append_backward(loss);
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  const BlockDesc& b = main.desc().Block(0);
  EXPECT_EQ(Types(b, forward_ops),
            (Args{"fill_constant", "mean_grad", "cross_entropy_grad", "softmax_grad", "elementwise_add_grad",
                  "mul_grad", "relu_grad", "elementwise_add_grad", "mul_grad"}));
  const OpDesc& fill = b.Op(forward_ops);
  EXPECT_EQ(fill.Output("Out"), Args{"mean_0.tmp_0@GRAD"});
  EXPECT_EQ(fill.GetAttr<int32_t>("op_role"), 257);                   // Backward | Loss
  EXPECT_EQ(b.Op(forward_ops - 1).GetAttr<int32_t>("op_role"), 256);  // the loss op: Forward | Loss
  for (size_t i = forward_ops + 1; i < b.OpSize(); ++i) EXPECT_EQ(b.Op(i).GetAttr<int32_t>("op_role"), 1);

  // The first layer's input is data: its gradient is not computed.
  const OpDesc& last_mul = b.Op(b.OpSize() - 1);
  EXPECT_TRUE(last_mul.Output("X@GRAD").empty());
  EXPECT_EQ(last_mul.Output("Y@GRAD"), Args{"fc_0.w_0@GRAD"});
  EXPECT_EQ(last_mul.GetAttr<std::vector<std::string>>("op_role_var"), (Args{"fc_0.w_0", "fc_0.w_0@GRAD"}));
  EXPECT_FALSE(b.HasVar("x@GRAD"));
  EXPECT_EQ(b.FindVar("fc_0.w_0@GRAD")->shape, (std::vector<int64_t>{4, 8}));

  ASSERT_EQ(pg.size(), 4u);  // creation order
  EXPECT_EQ(pg[0].first.name(), "fc_0.w_0");
  EXPECT_EQ(pg[0].second.name(), "fc_0.w_0@GRAD");
  EXPECT_EQ(pg[3].first.name(), "fc_1.b_0");
}

TEST(AppendBackwardTest, SumsGradientsOfAVariableUsedTwice) {
  UniqueNameGuard names;
  Program main, startup;
  Var loss;
  size_t forward_ops = 0;
  {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {3});
    Var h = layers::fc(x, 3, "", ParamAttr{}, NoBias());
    loss = layers::mean(layers::elementwise_mul(h, h));
    forward_ops = main.desc().Block(0).OpSize();
    append_backward(loss);
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  const BlockDesc& b = main.desc().Block(0);
  EXPECT_EQ(Types(b, forward_ops), (Args{"fill_constant", "mean_grad", "elementwise_mul_grad", "sum", "mul_grad"}));
  const OpDesc& mul_grad = b.Op(forward_ops + 2);
  EXPECT_EQ(mul_grad.Output("X@GRAD"), Args{"fc_0.tmp_0@GRAD@RENAME@0"});
  EXPECT_EQ(mul_grad.Output("Y@GRAD"), Args{"fc_0.tmp_0@GRAD@RENAME@1"});
  const OpDesc& sum = b.Op(forward_ops + 3);
  EXPECT_EQ(sum.Input("X"), (Args{"fc_0.tmp_0@GRAD@RENAME@0", "fc_0.tmp_0@GRAD@RENAME@1"}));
  EXPECT_EQ(sum.Output("Out"), Args{"fc_0.tmp_0@GRAD"});

  // And the summed gradient is right: d/dW mean((xW)^2) = 2/n · xᵀ(xW).
  Executor exe;
  Scope scope;
  *scope.Var("fc_0.w_0")->GetMutable<Tensor>() = MakeTensor<float>({3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  auto out = exe.Run(main.desc(), &scope, {{"x", MakeTensor<float>({1, 3}, {1, 2, 3})}}, {"fc_0.w_0@GRAD"});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> g = TensorToVector<float>((*out)[0]);
  EXPECT_NEAR(g[0], 2.0f / 3 * 1 * 1, 1e-6);  // row x0=1, col h0=1
  EXPECT_NEAR(g[5], 2.0f / 3 * 2 * 3, 1e-6);  // row x1=2, col h2=3
}

TEST(AppendBackwardTest, RejectsALossNoOpComputes) {
  UniqueNameGuard names;
  Program main, startup;
  {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {1});
    append_backward(x);
  }
  EXPECT_NE(main.status().message().find("no op computes loss 'x'"), std::string::npos) << main.status();
}

}  // namespace
}  // namespace oar
