// The GPU kernels of adagrad, decayed_adagrad, adamax, rmsprop (plain and
// centered), ftrl (lr_power -0.5 and another) and lars_momentum against
// their CPU kernels, from a dense gradient and (adagrad, rmsprop) from a
// sparse one with a repeated row. Needs a GPU: each test skips itself, with
// the reason, on a host without one. Labelled `gpu`. Tolerance:
// gpu_test_util.h's.
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace oar::testing {
namespace {

const DDim kShape{12, 5};

Inputs State() {
  return {{"p", RandomTensor<float>(kShape, -1, 1, 90)},      {"g", RandomTensor<float>(kShape, -1, 1, 91)},
          {"m", RandomTensor<float>(kShape, 0, 1, 92)},       {"m2", RandomTensor<float>(kShape, 0.1, 1, 93)},
          {"mg", RandomTensor<float>(kShape, -0.1, 0.1, 94)}, {"lr", MakeTensor<float>({1}, {0.02f})},
          {"b1p", MakeTensor<float>({1}, {0.729f})}};
}

// The ops under test, each with the outputs to compare. Every op updates
// its state in place, as an optimizer's program does.
std::vector<std::pair<OpDesc, std::vector<std::string>>> Updates() {
  const OpDesc::VarMap base = {{"Param", {"p"}}, {"Grad", {"g"}}, {"LearningRate", {"lr"}}};
  auto with = [&](OpDesc::VarMap extra) {
    OpDesc::VarMap in = base;
    in.insert(extra.begin(), extra.end());
    return in;
  };
  return {
      {MakeOp("adagrad", with({{"Moment", {"m"}}}), {{"ParamOut", {"p"}}, {"MomentOut", {"m"}}}), {"p", "m"}},
      {MakeOp("decayed_adagrad", with({{"Moment", {"m"}}}), {{"ParamOut", {"p"}}, {"MomentOut", {"m"}}},
              {{"decay", 0.9f}}),
       {"p", "m"}},
      {MakeOp("adamax", with({{"Moment", {"mg"}}, {"InfNorm", {"m"}}, {"Beta1Pow", {"b1p"}}}),
              {{"ParamOut", {"p"}}, {"MomentOut", {"mg"}}, {"InfNormOut", {"m"}}}),
       {"p", "mg", "m"}},
      {MakeOp("rmsprop", with({{"MeanSquare", {"m2"}}, {"Moment", {"m"}}}),
              {{"ParamOut", {"p"}}, {"MeanSquareOut", {"m2"}}, {"MomentOut", {"m"}}}, {{"momentum", 0.5f}}),
       {"p", "m2", "m"}},
      {MakeOp("rmsprop", with({{"MeanSquare", {"m2"}}, {"Moment", {"m"}}, {"MeanGrad", {"mg"}}}),
              {{"ParamOut", {"p"}}, {"MeanSquareOut", {"m2"}}, {"MomentOut", {"m"}}, {"MeanGradOut", {"mg"}}},
              {{"centered", true}}),
       {"p", "m2", "m", "mg"}},
      {MakeOp("ftrl", with({{"SquaredAccumulator", {"m2"}}, {"LinearAccumulator", {"mg"}}}),
              {{"ParamOut", {"p"}}, {"SquaredAccumOut", {"m2"}}, {"LinearAccumOut", {"mg"}}},
              {{"l1", 0.01f}, {"l2", 0.1f}}),
       {"p", "m2", "mg"}},
      {MakeOp("ftrl", with({{"SquaredAccumulator", {"m2"}}, {"LinearAccumulator", {"mg"}}}),
              {{"ParamOut", {"p"}}, {"SquaredAccumOut", {"m2"}}, {"LinearAccumOut", {"mg"}}},
              {{"l1", 0.01f}, {"l2", 0.1f}, {"lr_power", -0.7f}}),
       {"p", "m2", "mg"}},
      {MakeOp("lars_momentum", with({{"Velocity", {"m"}}}), {{"ParamOut", {"p"}}, {"VelocityOut", {"m"}}},
              {{"mu", 0.9f}, {"lars_coeff", 0.5f}, {"lars_weight_decay", 0.1f}}),
       {"p", "m"}},
  };
}

TEST(CudaOptimizerKernelTest, EveryUpdateFromADenseGradient) {
  REQUIRE_GPU();
  for (const auto& [op, outs] : Updates()) {
    SCOPED_TRACE(op.type);
    // ftrl's sigma is a difference of two pow()s divided by lr (0.02): CUDA's
    // and glibc's powf may differ by an ulp or two (~1.2e-7 near 1), which
    // that division makes ~6e-6; 1e-4 holds it with margin.
    Inputs in = State();
    // lars: a gradient much smaller than the parameter, so that the trust
    // ratio ||p|| / ||g|| (about 20) dominates the step and a kernel that
    // swapped or dropped a norm would fail.
    if (op.type == "lars_momentum") in["g"] = RandomTensor<float>(kShape, -0.05, 0.05, 96);
    Check({op}, in, outs, {}, op.type == "ftrl" ? 1e-4 : 1e-5);
  }
}

TEST(CudaOptimizerKernelTest, AdagradAndRmspropFromASparseGradient) {
  REQUIRE_GPU();
  SelectedRows grad;
  grad.height = kShape[0];
  grad.rows = {3, 10, 3, 0};
  grad.value = RandomTensor<float>({4, kShape[1]}, -1, 1, 95);
  for (const auto& [op, outs] : Updates()) {
    if (op.type != "adagrad" && op.type != "rmsprop") continue;
    SCOPED_TRACE(op.type);
    Inputs dense = State();
    dense.erase("g");
    Scope cpu, gpu;
    *cpu.Var("g")->GetMutable<SelectedRows>() = grad;
    SelectedRows* g = gpu.Var("g")->GetMutable<SelectedRows>();
    g->height = grad.height;
    g->rows = grad.rows;
    g->value.CopyFrom(grad.value);
    ASSERT_TRUE(RunBoth({op}, dense, &cpu, &gpu).ok());
    for (const auto& n : outs) ExpectClose<float>(cpu, gpu, n);
  }
}

}  // namespace
}  // namespace oar::testing
