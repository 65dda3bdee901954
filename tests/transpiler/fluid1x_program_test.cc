// Training programs as Fluid 1.3 writes them load and train to the numbers
// of the same network as Paddle 2.6 writes it. Fluid 1.x programs cannot
// be made here (Fluid 1.x does not install on this Python), so the test
// takes two Paddle-written fixtures (an fc net with Adam, an embedding net
// with SGD) and rewrites their gradient and optimizer ops the way Fluid 1.3
// laid them out (per each GradOpMaker's history in Fluid's source):
//   elementwise_add_grad without X (1.3-1.6), reduce_mean_grad and
//   lookup_table*_grad with the forward Out (1.0-1.4),
//   softmax_with_cross_entropy_grad with Loss (1.0-1.4), and adam without
//   Beta1PowOut/Beta2PowOut, the powers advanced by scale ops after it
//   (Fluid 1.x's Adam._finish_update).
// The rewritten programs must train to Paddle's recorded losses within
// 1e-5 and transpile for a 2-pserver job.
#include <cmath>

#include "gtest/gtest.h"
#include "tests/common/paddle/paddle_fixture.h"
#include "transpiler/distribute_transpiler.h"

namespace oar {
namespace {

// Rewrites block 0 of `p` as Fluid 1.3 would have written it; the number of
// ops changed (so that the test knows the rewrite found what it rewrites).
int AsFluid13(ProgramDesc* p) {
  BlockDesc* b = p->MutableBlock(0);
  std::map<std::string, std::string> out_of;  // a forward op's Out, by its type and X
  int changed = 0;
  for (size_t i = 0; i < b->OpSize(); ++i) {
    OpDesc* op = b->MutableOp(i);
    if (op->type == "elementwise_add_grad") {
      op->inputs.erase("X");
      ++changed;
    } else if (op->type == "reduce_mean" || op->type == "lookup_table_v2" || op->type == "lookup_table") {
      const std::string in = op->type == "reduce_mean" ? op->Input("X")[0] : op->Input("Ids")[0];
      out_of[op->type + "/" + in] = op->Output("Out")[0];
    } else if (op->type == "reduce_mean_grad" || op->type == "lookup_table_v2_grad") {
      const std::string fwd = op->type.substr(0, op->type.size() - 5);
      const std::string in = fwd == "reduce_mean" ? op->Input("X")[0] : op->Input("Ids")[0];
      op->inputs["Out"] = {out_of.at(fwd + "/" + in)};
      ++changed;
    } else if (op->type == "softmax_with_cross_entropy") {
      out_of["loss"] = op->Output("Loss")[0];
    } else if (op->type == "softmax_with_cross_entropy_grad") {
      op->inputs["Loss"] = {out_of.at("loss")};
      ++changed;
    } else if (op->type == "adam") {
      const std::string b1 = op->Input("Beta1Pow")[0], b2 = op->Input("Beta2Pow")[0];
      const float beta1 = op->GetAttr<float>("beta1"), beta2 = op->GetAttr<float>("beta2");
      op->outputs.erase("Beta1PowOut");
      op->outputs.erase("Beta2PowOut");
      for (const auto& [pow, beta] : {std::make_pair(b1, beta1), std::make_pair(b2, beta2)}) {
        OpDesc* scale = b->InsertOp(++i);
        scale->type = "scale";
        scale->inputs = {{"X", {pow}}};
        scale->outputs = {{"Out", {pow}}};
        scale->attrs = {{"scale", beta}, {"bias", 0.0f}, {"bias_after_scale", true}, {"op_role", int32_t{2}}};
      }
      ++changed;
    }
  }
  return changed;
}

class Fluid13ProgramTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Fluid13ProgramTest, TrainsToPaddlesLossesAndTranspiles) {
  paddle_fixture::Fixture f = paddle_fixture::Load(GetParam());
  ASSERT_TRUE(f.main && f.startup);
  ASSERT_GE(AsFluid13(f.main.get()), 3) << "the rewrite found too little to rewrite";
  const std::vector<double> got = paddle_fixture::Train(GetParam(), f);
  ASSERT_EQ(got.size(), f.losses.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], f.losses[i], 1e-5 * std::abs(f.losses[i])) << "step " << i;
  }
  DistributeTranspiler t;
  ProgramDesc main = *f.main, startup = *f.startup;
  absl::Status s = t.transpile(0, &main, "127.0.0.1:6170,127.0.0.1:6171", 2, true, &startup);
  ASSERT_TRUE(s.ok()) << s;
  auto trainer = t.get_trainer_program(/*wait_port=*/false);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  int sends = 0;
  for (size_t i = 0; i < trainer->Block(0).OpSize(); ++i) sends += trainer->Block(0).Op(i).type == "send";
  EXPECT_GT(sends, 0);
  for (const char* ep : {"127.0.0.1:6170", "127.0.0.1:6171"}) {
    auto ps = t.get_pserver_programs(ep);
    EXPECT_TRUE(ps.ok()) << ep << ": " << ps.status();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Fluid13ProgramTest, ::testing::Values("mlp", "embedding"));

}  // namespace
}  // namespace oar
