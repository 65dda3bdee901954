// A sync pserver's optimizer ops split a large parameter's dense update
// over its pool (RunEnv::intra_op): the numbers are those of one thread, to
// the bit, for sgd, momentum and adam.
#include "common/base/thread_pool.h"
#include "common/framework/op_registry.h"
#include "common/framework/prepared_block.h"
#include "common/framework/run_env.h"
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

constexpr int64_t kN = 300001;  // several grains, not a multiple of one

// Three steps of `op` over a fresh scope; the outputs named `outs`.
std::vector<std::vector<float>> Steps(const OpDesc& op, const std::vector<std::string>& outs, ThreadPool* pool) {
  Scope s;
  for (const char* v : {"p", "v", "m1"}) SetTensor(&s, v, RandomTensor<float>({kN}, -1, 1, 7));
  SetTensor(&s, "m2", RandomTensor<float>({kN}, 0, 1, 8));  // a second moment: not negative
  SetTensor(&s, "lr", MakeTensor<float>({1}, {0.01f}));
  SetTensor(&s, "b1p", MakeTensor<float>({1}, {0.9f}));
  SetTensor(&s, "b2p", MakeTensor<float>({1}, {0.999f}));
  ProgramDesc program;
  *program.MutableBlock(0)->AppendOp() = op;
  RunEnv env;
  env.intra_op = pool;
  auto block = PreparedBlock::Create(program, 0, OpRegistry::Global(), CPUPlace(), &env);
  EXPECT_TRUE(block.ok()) << block.status();
  for (int step = 0; step < 3; ++step) {
    SetTensor(&s, "g", RandomTensor<float>({kN}, -1, 1, 100 + step));
    EXPECT_TRUE((*block)->Bind(&s, &s).ok());
    EXPECT_TRUE((*block)->Run().ok());
  }
  std::vector<std::vector<float>> got;
  for (const std::string& o : outs) got.push_back(TensorToVector<float>(GetTensor(s, o)));
  return got;
}

TEST(OptimizerIntraOpTest, ASplitUpdateIsTheOneThreadUpdateToTheBit) {
  ThreadPool pool(3);
  const std::vector<std::pair<OpDesc, std::vector<std::string>>> cases = {
      {MakeOp("sgd", {{"Param", {"p"}}, {"Grad", {"g"}}, {"LearningRate", {"lr"}}}, {{"ParamOut", {"p"}}}), {"p"}},
      {MakeOp("momentum", {{"Param", {"p"}}, {"Grad", {"g"}}, {"Velocity", {"v"}}, {"LearningRate", {"lr"}}},
              {{"ParamOut", {"p"}}, {"VelocityOut", {"v"}}}, {{"mu", 0.9f}, {"use_nesterov", true}}),
       {"p", "v"}},
      {MakeOp("adam",
              {{"Param", {"p"}},
               {"Grad", {"g"}},
               {"Moment1", {"m1"}},
               {"Moment2", {"m2"}},
               {"LearningRate", {"lr"}},
               {"Beta1Pow", {"b1p"}},
               {"Beta2Pow", {"b2p"}}},
              {{"ParamOut", {"p"}}, {"Moment1Out", {"m1"}}, {"Moment2Out", {"m2"}}},
              {{"beta1", 0.9f}, {"beta2", 0.999f}, {"epsilon", 1e-8f}}),
       {"p", "m1", "m2"}},
  };
  for (const auto& [op, outs] : cases) {
    const auto alone = Steps(op, outs, nullptr), split = Steps(op, outs, &pool);
    ASSERT_EQ(alone.size(), split.size());
    for (size_t k = 0; k < alone.size(); ++k) EXPECT_EQ(alone[k], split[k]) << op.type << " " << outs[k];
  }
}

}  // namespace
}  // namespace oar::testing
