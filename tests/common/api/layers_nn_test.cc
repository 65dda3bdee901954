// Vision, shape and embedding layers build Fluid's ops, names and defaults.
#include <cmath>

#include "common/api/backward.h"
#include "common/api/layers.h"
#include "common/api/unique_name.h"
#include "common/framework/executor.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

using Args = std::vector<std::string>;

std::vector<std::string> Types(const BlockDesc& b) {
  std::vector<std::string> t;
  for (size_t i = 0; i < b.OpSize(); ++i) t.push_back(b.Op(i).type);
  return t;
}

TEST(LayersNnTest, SimpleImgConvPoolAndBatchNormFollowFluid) {
  UniqueNameGuard names;
  Program main, startup;
  Var out;
  {
    ProgramGuard g(&main, &startup);
    Var img = layers::data("img", {1, 28, 28});
    Var c = nets::simple_img_conv_pool(img, 20, 5, 2, 2, 0, "max", false, 1, 0, 1, 1, {}, {}, "relu");
    out = layers::batch_norm(c);
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  const BlockDesc& b = main.desc().Block(0);
  EXPECT_EQ(Types(b), (Args{"conv2d", "elementwise_add", "relu", "pool2d", "batch_norm"}));
  EXPECT_EQ(b.Op(0).Input("Filter"), Args{"conv2d_0.w_0"});
  EXPECT_EQ(b.FindVar("conv2d_0.w_0")->shape, (std::vector<int64_t>{20, 1, 5, 5}));
  EXPECT_EQ(b.FindVar("conv2d_0.b_0")->shape, (std::vector<int64_t>{20}));
  EXPECT_EQ(b.Op(1).GetAttr<int32_t>("axis"), 1);
  EXPECT_EQ(b.FindVar("conv2d_0.tmp_0")->shape, (std::vector<int64_t>{-1, 20, 24, 24}));
  EXPECT_EQ(b.FindVar("pool2d_0.tmp_0")->shape, (std::vector<int64_t>{-1, 20, 12, 12}));
  EXPECT_EQ(b.Op(3).GetAttr<std::vector<int32_t>>("ksize"), (std::vector<int32_t>{2, 2}));
  const OpDesc& bn = b.Op(4);
  EXPECT_EQ(bn.Input("Scale"), Args{"batch_norm_0.w_0"});
  EXPECT_EQ(bn.Input("Bias"), Args{"batch_norm_0.b_0"});
  EXPECT_EQ(bn.Input("Mean"), Args{"batch_norm_0.w_1"});
  EXPECT_EQ(bn.Input("Variance"), Args{"batch_norm_0.w_2"});
  EXPECT_EQ(bn.Output("MeanOut"), bn.Input("Mean"));
  EXPECT_EQ(out.name(), "batch_norm_0.tmp_2");
  // Conv filters start Normal(0, sqrt(2 / (5·5·1))), as Fluid's default.
  const OpDesc& init = startup.desc().Block(0).Op(0);
  EXPECT_EQ(init.type, "gaussian_random");
  EXPECT_NEAR(init.GetAttr<float>("std"), std::sqrt(2.0 / 25), 1e-6);
  // Moving statistics are parameters that are never trained.
  EXPECT_FALSE(b.FindVar("batch_norm_0.w_1")->trainable);
}

TEST(LayersNnTest, BatchNormStatisticsGetNoGradient) {
  UniqueNameGuard names;
  Program main, startup;
  std::vector<std::pair<Var, Var>> pg;
  {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {3, 4, 4});
    Var loss = layers::mean(layers::batch_norm(layers::conv2d(x, 2, {3, 3})));
    pg = append_backward(loss);
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  std::vector<std::string> params;
  for (const auto& [p, g] : pg) params.push_back(p.name());
  EXPECT_EQ(params, (Args{"conv2d_0.w_0", "conv2d_0.b_0", "batch_norm_0.w_0", "batch_norm_0.b_0"}));
}

TEST(LayersNnTest, ShapeLayersUseThe2OpsWithXShape) {
  UniqueNameGuard names;
  Program main, startup;
  {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {2, 3});
    Var r = layers::reshape(x, {0, 6});
    EXPECT_EQ(r.shape(), (std::vector<int64_t>{-1, 6}));
    Var t = layers::transpose(x, {0, 2, 1});
    EXPECT_EQ(t.shape(), (std::vector<int64_t>{-1, 3, 2}));
    EXPECT_EQ(layers::flatten(x, 1).shape(), (std::vector<int64_t>{-1, 6}));
    EXPECT_EQ(layers::unsqueeze(x, {1}).shape(), (std::vector<int64_t>{-1, 1, 2, 3}));
    std::vector<Var> parts = layers::split(x, 3, {}, -1);
    ASSERT_EQ(parts.size(), 3u);
    EXPECT_EQ(parts[0].shape(), (std::vector<int64_t>{-1, 2, 1}));
    EXPECT_EQ(layers::concat(parts, 2).shape(), (std::vector<int64_t>{-1, 2, 3}));
    Var d = layers::dropout(x, 0.3f, false, 7);
    EXPECT_EQ(d.name(), "dropout_0.tmp_0");
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  const BlockDesc& b = main.desc().Block(0);
  EXPECT_EQ(b.Op(0).type, "reshape2");
  EXPECT_EQ(b.Op(0).Output("XShape"), Args{"reshape2_0.tmp_1"});
  EXPECT_EQ(b.Op(1).type, "transpose2");
  EXPECT_TRUE(b.Op(b.OpSize() - 1).GetAttr<bool>("fix_seed"));
}

TEST(LayersNnTest, SparseEmbeddingTrainsThroughSelectedRowsGradient) {
  UniqueNameGuard names;
  Program main, startup;
  Var loss;
  {
    ProgramGuard g(&main, &startup);
    Var ids = layers::data("ids", {1}, DataType::kInt64, 1);
    ParamAttr w;
    w.name = "emb";
    w.initializer = initializer::Constant(1.0f);
    Var emb = layers::embedding(ids, {10, 4}, /*is_sparse=*/true, false, -1, w);
    loss = layers::mean(layers::sequence_pool(emb, "sum"));
    append_backward(loss);
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  const BlockDesc& b = main.desc().Block(0);
  EXPECT_EQ(b.FindVar("emb@GRAD")->type, paddle::framework::proto::VarType::SELECTED_ROWS);
  Executor exe;
  Scope scope;
  ASSERT_TRUE(exe.Run(startup.desc(), &scope).ok());
  Tensor ids = MakeTensor<int64_t>({3, 1}, {4, 7, 4});
  ids.set_lod({{0, 2, 3}});
  auto out = exe.Run(main.desc(), &scope, {{"ids", ids}}, {loss.name()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[0], 3.0f / 2.0f);  // 2 sequences × 4 wide, sums of 2 and 1 ones
}

}  // namespace
}  // namespace oar
