// Programs written by PaddlePaddle itself (tests/testdata, produced by
// gen_paddle_programs.py with paddlepaddle 2.6.2, the successor of Fluid 1.x
// with the same framework.proto) must parse, and where our layers build the
// same network they must build it op for op: same types, slots, names, key
// attributes and initializer ranges.
#include <fstream>
#include <sstream>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/framework/program_desc.h"
#include "gtest/gtest.h"
#include "tests/util/build_paths.h"

namespace oar {
namespace {

std::unique_ptr<ProgramDesc> LoadFixture(const std::string& name) {
  std::ifstream f(TestdataDir() + "/" + name, std::ios::binary);
  std::stringstream buf;
  buf << f.rdbuf();
  auto p = ProgramDesc::Parse(buf.str());
  EXPECT_TRUE(p.ok()) << name << ": " << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

struct Ours {
  Program main, startup;
};

std::unique_ptr<Ours> BuildOurs() {
  auto o = std::make_unique<Ours>();
  UniqueNameGuard names;
  ProgramGuard g(&o->main, &o->startup);
  Var x = layers::data("x", {784});
  Var label = layers::data("label", {1}, DataType::kInt64);
  Var h = layers::fc(x, 256, "relu");
  Var pred = layers::fc(h, 10, "softmax");
  Var loss = layers::mean(layers::cross_entropy(pred, label));
  optimizer::SGD(0.01f).minimize(loss);
  EXPECT_TRUE(o->main.status().ok()) << o->main.status();
  return o;
}

// Type and every slot's arguments; `skip_slots` are slots Paddle 2.x added.
void ExpectSameOp(const OpDesc& theirs, const OpDesc& ours, const std::set<std::string>& skip_slots = {}) {
  EXPECT_EQ(theirs.type, ours.type);
  auto strip = [&](OpDesc::VarMap m) {
    for (const auto& s : skip_slots) m.erase(s);
    return m;
  };
  EXPECT_EQ(strip(theirs.inputs), strip(ours.inputs)) << theirs.ToString().substr(0, 200);
  EXPECT_EQ(strip(theirs.outputs), strip(ours.outputs)) << theirs.ToString().substr(0, 200);
  EXPECT_EQ(theirs.GetAttr<int32_t>("op_role", -1), ours.GetAttr<int32_t>("op_role", -2)) << theirs.type;
}

TEST(FluidCompatTest, PaddleProgramsParseWithTheirShapes) {
  auto main = LoadFixture("paddle262_mlp_main.pb");
  ASSERT_NE(main, nullptr);
  const BlockDesc& b = main->Block(0);
  EXPECT_EQ(b.FindVar("fc_0.w_0")->shape, (std::vector<int64_t>{784, 256}));
  EXPECT_TRUE(b.FindVar("fc_0.w_0")->persistable);
  EXPECT_EQ(b.FindVar("label")->dtype, DataType::kInt64);
  EXPECT_EQ(b.FindVar("x")->shape, (std::vector<int64_t>{-1, 784}));
  EXPECT_EQ(b.Op(0).GetAttr<int32_t>("x_num_col_dims"), 1);
  // What we parsed serializes and parses back to the same program.
  auto again = ProgramDesc::Parse(main->Serialize());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->ToString(), main->ToString());
}

TEST(FluidCompatTest, ForwardPassMatchesPaddleOpForOp) {
  auto theirs = LoadFixture("paddle262_mlp_main.pb");
  auto ours = BuildOurs();
  ASSERT_NE(theirs, nullptr);
  const BlockDesc& t = theirs->Block(0);
  const BlockDesc& o = ours->main.desc().Block(0);
  for (size_t i = 0; i < 6; ++i) {  // mul, elementwise_add, relu, mul, elementwise_add, softmax
    SCOPED_TRACE(i);
    ExpectSameOp(t.Op(i), o.Op(i));
  }
  EXPECT_EQ(t.Op(1).GetAttr<int32_t>("axis"), o.Op(1).GetAttr<int32_t>("axis"));
  for (const char* v : {"fc_0.w_0", "fc_0.b_0", "fc_0.tmp_2", "fc_1.w_0", "fc_1.tmp_2"}) {
    EXPECT_EQ(t.FindVar(v)->shape, o.FindVar(v)->shape) << v;
    EXPECT_EQ(t.FindVar(v)->persistable, o.FindVar(v)->persistable) << v;
  }
}

TEST(FluidCompatTest, BackwardAndOptimizerMatchPaddleBelowTheLoss) {
  // The loss layers differ (Paddle 2.x rewrote cross_entropy and mean), so
  // compare from softmax_grad down, and the sgd ops.
  auto theirs = LoadFixture("paddle262_mlp_main.pb");
  auto ours = BuildOurs();
  ASSERT_NE(theirs, nullptr);
  const BlockDesc& t = theirs->Block(0);
  const BlockDesc& o = ours->main.desc().Block(0);
  auto find = [](const BlockDesc& b, const std::string& type) {
    for (size_t i = 0; i < b.OpSize(); ++i)
      if (b.Op(i).type == type) return i;
    return b.OpSize();
  };
  size_t ti = find(t, "softmax_grad"), oi = find(o, "softmax_grad");
  ASSERT_LT(ti, t.OpSize());
  ASSERT_LT(oi, o.OpSize());
  ASSERT_EQ(t.OpSize() - ti, o.OpSize() - oi);
  for (size_t k = 0; ti + k < t.OpSize(); ++k) {
    SCOPED_TRACE(t.Op(ti + k).type);
    ExpectSameOp(t.Op(ti + k), o.Op(oi + k), {"MasterParam", "MasterParamOut"});
    EXPECT_EQ(t.Op(ti + k).GetAttr<std::vector<std::string>>("op_role_var"),
              o.Op(oi + k).GetAttr<std::vector<std::string>>("op_role_var"));
  }
}

TEST(FluidCompatTest, StartupInitializesLikePaddle) {
  auto theirs = LoadFixture("paddle262_mlp_startup.pb");
  auto ours = BuildOurs();
  ASSERT_NE(theirs, nullptr);
  const BlockDesc& t = theirs->Block(0);
  const BlockDesc& o = ours->startup.desc().Block(0);
  ASSERT_EQ(t.OpSize(), o.OpSize());
  for (size_t i = 0; i < t.OpSize(); ++i) {
    SCOPED_TRACE(i);
    ExpectSameOp(t.Op(i), o.Op(i), {"ShapeTensor", "ShapeTensorList"});
    EXPECT_FLOAT_EQ(t.Op(i).GetAttr<float>("max"), o.Op(i).GetAttr<float>("max"));
    EXPECT_FLOAT_EQ(t.Op(i).GetAttr<float>("value"), o.Op(i).GetAttr<float>("value"));
  }
}

}  // namespace
}  // namespace oar
