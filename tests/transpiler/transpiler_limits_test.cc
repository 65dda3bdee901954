// The DistributeTranspiler on sparse gradients, and what it refuses
// (two distributed lookup tables, a table's unsupported optimizer, DC-ASGD, cross-parameter clipping, bad
// arguments) with errors that say why.
#include "gtest/gtest.h"
#include "tests/transpiler/fc_net.h"
#include "transpiler/distribute_transpiler.h"

namespace oar {
namespace {

using Ops = std::vector<std::string>;

TEST(DistributeTranspilerTest, SparseGradientIsCutBySplitSelectedRowsOrAtRuntime) {
  UniqueNameGuard names;
  Program main, startup;
  {
    ProgramGuard g(&main, &startup);
    ParamAttr emb;
    emb.name = "emb";
    Var e =
        layers::embedding(layers::data("ids", {1}, DataType::kInt64), {4096, 8}, /*is_sparse=*/true, false, -1, emb);
    optimizer::SGD(0.1f).minimize(layers::mean(e));
  }
  DistributeTranspiler t;
  ASSERT_TRUE(t.transpile(0, &main.desc(), kTwoPservers, 2, true, &startup.desc()).ok());
  auto trainer = t.get_trainer_program(false);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const OpDesc& split = OnlyOp(trainer->Block(0), "split_selected_rows");
  EXPECT_EQ(split.GetAttr<std::vector<int64_t>>("height_sections"), (std::vector<int64_t>{2048, 2048}));
  EXPECT_EQ(split.Output("Out"), (Ops{"emb@GRAD.block0.trainer_0", "emb@GRAD.block1.trainer_0"}));
  EXPECT_EQ(split.role(), static_cast<int32_t>(OpRole::kDist));
  auto ps = t.get_pserver_program("127.0.0.1:6174");
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(ps->Block(0).FindVar("emb@GRAD.block0")->type, paddle::framework::proto::VarType::SELECTED_ROWS);
  EXPECT_EQ(ps->Block(0).Op(0).GetAttr<Ops>("sparse_grad_to_param"), (Ops{"emb@GRAD.block0:emb.block0"}));
  // With runtime_split_send_recv (Fluid 1.6+) there is no split op: the
  // send op takes the whole gradient and cuts it by the blocks' rows.
  DistributeTranspilerConfig c;
  c.runtime_split_send_recv = true;
  UniqueNameGuard names2;
  Program main2, startup2;
  {
    ProgramGuard g(&main2, &startup2);
    ParamAttr emb;
    emb.name = "emb";
    Var e = layers::embedding(layers::data("ids", {1}, DataType::kInt64), {4096, 8}, true, false, -1, emb);
    optimizer::SGD(0.1f).minimize(layers::mean(e));
  }
  DistributeTranspiler rt(c);
  ASSERT_TRUE(rt.transpile(0, &main2.desc(), kTwoPservers, 2, true, &startup2.desc()).ok());
  auto rt_trainer = rt.get_trainer_program(false);
  ASSERT_TRUE(rt_trainer.ok()) << rt_trainer.status();
  for (size_t i = 0; i < rt_trainer->Block(0).OpSize(); ++i) {
    EXPECT_NE(rt_trainer->Block(0).Op(i).type, "split_selected_rows");
  }
  const OpDesc& send = OnlyOp(rt_trainer->Block(0), "send");
  EXPECT_EQ(send.Input("X"), (Ops{"emb@GRAD"}));
  EXPECT_EQ(send.GetAttr<std::vector<int32_t>>("sections"), (std::vector<int32_t>{2048, 2048}));
  EXPECT_EQ(send.GetAttr<Ops>("send_varnames"), (Ops{"emb@GRAD.block0.trainer_0", "emb@GRAD.block1.trainer_0"}));
  auto rt_ps = rt.get_pserver_program("127.0.0.1:6174");  // the same pserver program as without
  ASSERT_TRUE(rt_ps.ok()) << rt_ps.status();
  EXPECT_EQ(rt_ps->Block(0).Op(0).GetAttr<Ops>("sparse_grad_to_param"), (Ops{"emb@GRAD.block0:emb.block0"}));
}

TEST(DistributeTranspilerTest, RefusesWhatItCannotDistribute) {
  {  // two distributed lookup tables (Fluid's transpiler distributes one)
    UniqueNameGuard names;
    Program main, startup;
    {
      ProgramGuard g(&main, &startup);
      Var a = layers::embedding(layers::data("a", {1}, DataType::kInt64), {4096, 8}, true, /*is_distributed=*/true);
      Var b = layers::embedding(layers::data("b", {1}, DataType::kInt64), {4096, 8}, true, /*is_distributed=*/true);
      optimizer::SGD(0.1f).minimize(layers::mean(layers::elementwise_add(a, b)));
    }
    absl::Status s = DistributeTranspiler().transpile(0, &main.desc(), kTwoPservers, 2, true, &startup.desc());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("a program may distribute one table"), std::string::npos) << s;
  }
  {  // a distributed table updated by an optimizer a table cannot run
    UniqueNameGuard names;
    Program main, startup;
    {
      ProgramGuard g(&main, &startup);
      Var e = layers::embedding(layers::data("ids", {1}, DataType::kInt64), {4096, 8}, true, true);
      optimizer::Momentum(0.1f, 0.9f).minimize(layers::mean(e));
    }
    absl::Status s = DistributeTranspiler().transpile(0, &main.desc(), kTwoPservers, 2, true, &startup.desc());
    EXPECT_NE(s.message().find("distributed tables support sgd, adagrad and adam"), std::string::npos) << s;
  }
  {  // DC-ASGD
    FcNet net;
    DistributeTranspilerConfig c;
    c.enable_dc_asgd = true;
    c.sync_mode = false;
    absl::Status s =
        DistributeTranspiler(c).transpile(0, &net.main.desc(), kTwoPservers, 2, false, &net.startup.desc());
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  }
  {  // GradientClipByGlobalNorm mixes every gradient: no pserver can compute it alone
    UniqueNameGuard names;
    Program main, startup;
    {
      ProgramGuard g(&main, &startup);
      Var h = layers::fc(layers::data("x", {1000}), 1000);
      set_gradient_clip(GradientClipByGlobalNorm(1.0f));
      optimizer::SGD(0.1f).minimize(layers::mean(h));
    }
    DistributeTranspiler t;
    ASSERT_TRUE(main.status().ok()) << main.status();
    ASSERT_TRUE(t.transpile(0, &main.desc(), kTwoPservers, 2, true, &startup.desc()).ok());
    absl::Status s = t.get_pserver_program("127.0.0.1:6175").status();
    EXPECT_NE(s.message().find("GradientClipByGlobalNorm"), std::string::npos) << s;
  }
  {  // bad arguments name what is wrong
    FcNet net;
    DistributeTranspiler t;
    EXPECT_NE(t.transpile(2, &net.main.desc(), kTwoPservers, 2).message().find("trainer_id 2 is not in [0, 2)"),
              std::string::npos);
    FcNet net2;
    EXPECT_NE(DistributeTranspiler().transpile(0, &net2.main.desc(), "a:1,a:1", 2).message().find("listed twice"),
              std::string::npos);
    FcNet net3;
    DistributeTranspiler t3;
    ASSERT_TRUE(t3.transpile(0, &net3.main.desc(), kTwoPservers, 2, true, &net3.startup.desc()).ok());
    EXPECT_NE(t3.get_pserver_program("127.0.0.1:9").status().message().find("not one of the pservers"),
              std::string::npos);
    Program empty;
    EXPECT_NE(DistributeTranspiler().transpile(0, &empty.desc(), kTwoPservers, 2).message().find("no optimize ops"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace oar
