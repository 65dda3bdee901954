// The GPU kernels on cuDNN (conv2d, pool2d, batch_norm) and the small ops
// fashion_cnn's programs add (dropout, cast, increment, floor,
// elementwise_pow), each against its CPU kernel on the same inputs, forward
// and gradient. Needs a GPU: each test skips itself, with the reason, on a
// host without one. Labelled `gpu`.
//
// Tolerance: gpu_test_util.h's, except where a test says why it differs.
#include <cmath>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace oar::testing {
namespace {

struct ConvCase {
  DDim in, filter;
  std::vector<int32_t> strides, paddings, dilations;
  int32_t groups;
};

std::map<std::string, Attribute> ConvAttrs(const ConvCase& c, bool exhaustive) {
  return {{"strides", c.strides}, {"paddings", c.paddings},          {"dilations", c.dilations},
          {"groups", c.groups},   {"exhaustive_search", exhaustive}, {"use_cudnn", true}};
}

// Each output of a convolution sums K products of values in [-1, 1]: K =
// C/groups·kh·kw for Output, M/groups·kh·kw for Input@GRAD, N·out_h·out_w for
// Filter@GRAD. cuDNN's algorithms (FFT and Winograd among them when
// exhaustive_search picks the fastest) round differently from the CPU's
// GEMM; their float32 error stays within a few ulps per term, so atol is
// 4e-6·K (1e-4 at K = 25) — still far below a wrong index or a dropped term.
double ConvAtol(int64_t terms) { return 4e-6 * static_cast<double>(terms); }

TEST(CudnnKernelTest, Conv2dAndGradsOverShapesAndAttributes) {
  REQUIRE_GPU();
  const std::vector<ConvCase> cases = {
      {{4, 1, 28, 28}, {20, 1, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 1},    // fashion_cnn's first conv
      {{3, 20, 14, 14}, {50, 20, 5, 5}, {1, 1}, {2, 2}, {1, 1}, 1},  // and its second
      {{2, 6, 9, 7}, {4, 3, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2},       // odd sizes, groups, dilation
  };
  for (const ConvCase& c : cases) {
    for (bool exhaustive : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "Input" << c.in.ToString() << " Filter" << c.filter.ToString()
                                        << " exhaustive=" << exhaustive);
      OpDesc fwd =
          MakeOp("conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, {{"Output", {"y"}}}, ConvAttrs(c, exhaustive));
      Scope shape_scope;
      SetTensor(&shape_scope, "x", RandomTensor<float>(c.in, -1, 1, 1));
      SetTensor(&shape_scope, "w", RandomTensor<float>(c.filter, -1, 1, 2));
      ASSERT_TRUE(RunOpsOn({fwd}, &shape_scope, CPUPlace()).ok());
      const DDim out = GetTensor(shape_scope, "y").dims();
      OpDesc grad = MakeOp("conv2d_grad", {{"Input", {"x"}}, {"Filter", {"w"}}, {"Output@GRAD", {"g"}}},
                           {{"Input@GRAD", {"dx"}}, {"Filter@GRAD", {"dw"}}}, ConvAttrs(c, exhaustive));
      Scope cpu, gpu;
      absl::Status s = RunBoth({fwd, grad},
                               {{"x", RandomTensor<float>(c.in, -1, 1, 1)},
                                {"w", RandomTensor<float>(c.filter, -1, 1, 2)},
                                {"g", RandomTensor<float>(out, -1, 1, 3)}},
                               &cpu, &gpu);
      ASSERT_TRUE(s.ok()) << s;
      const int64_t spatial = c.filter[2] * c.filter[3];
      ExpectClose<float>(cpu, gpu, "y", ConvAtol(c.filter[1] * spatial));
      ExpectClose<float>(cpu, gpu, "dx", ConvAtol(c.filter[0] / c.groups * spatial));
      ExpectClose<float>(cpu, gpu, "dw", ConvAtol(out[0] * out[2] * out[3]));
    }
  }
}

TEST(CudnnKernelTest, Pool2dMaxAvgGlobalAndGrads) {
  REQUIRE_GPU();
  struct PoolCase {
    std::string type;
    std::vector<int32_t> ksize, strides, paddings;
    bool exclusive, global;
  };
  const std::vector<PoolCase> cases = {
      {"max", {2, 2}, {2, 2}, {0, 0}, true, false},  // fashion_cnn's
      {"max", {3, 3}, {2, 2}, {1, 1}, true, false},  {"avg", {3, 3}, {2, 2}, {1, 1}, true, false},
      {"avg", {3, 2}, {1, 2}, {1, 0}, false, false}, {"avg", {1, 1}, {1, 1}, {0, 0}, true, true},
  };
  const DDim in{2, 3, 9, 8};
  for (const PoolCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.type << " ksize " << c.ksize[0] << "x" << c.ksize[1] << " pad "
                                      << c.paddings[0] << " exclusive=" << c.exclusive << " global=" << c.global);
    std::map<std::string, Attribute> attrs = {{"pooling_type", c.type},   {"ksize", c.ksize},
                                              {"strides", c.strides},     {"paddings", c.paddings},
                                              {"exclusive", c.exclusive}, {"global_pooling", c.global}};
    OpDesc fwd = MakeOp("pool2d", {{"X", {"x"}}}, {{"Out", {"y"}}}, attrs);
    Scope shape_scope;
    // Distinct values, so every window has one maximum on both devices.
    SetTensor(&shape_scope, "x", RandomTensor<float>(in, -1, 1, 4));
    ASSERT_TRUE(RunOpsOn({fwd}, &shape_scope, CPUPlace()).ok());
    const DDim out = GetTensor(shape_scope, "y").dims();
    OpDesc grad =
        MakeOp("pool2d_grad", {{"X", {"x"}}, {"Out", {"y"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}}, attrs);
    Check({fwd, grad}, {{"x", RandomTensor<float>(in, -1, 1, 4)}, {"g", RandomTensor<float>(out, -1, 1, 5)}},
          {"y", "dx"});
  }
}

TEST(CudnnKernelTest, Pool2dCeilModeThatAddsACellIsRefusedByName) {
  REQUIRE_GPU();
  Scope gpu;
  SetTensor(&gpu, "x", RandomTensor<float>({1, 1, 5, 5}, -1, 1, 6));
  absl::Status s = RunOpsOn(
      {MakeOp("pool2d", {{"X", {"x"}}}, {{"Out", {"y"}}},
              {{"ksize", std::vector<int32_t>{2, 2}}, {"strides", std::vector<int32_t>{2, 2}}, {"ceil_mode", true}})},
      &gpu, CUDAPlace(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("ceil_mode"), std::string::npos) << s;
}

Inputs BatchNormInputs(const DDim& x, uint64_t seed) {
  const int64_t c = x[1];
  return {{"x", RandomTensor<float>(x, -2, 3, seed)},          {"scale", RandomTensor<float>({c}, 0.5, 1.5, seed + 1)},
          {"bias", RandomTensor<float>({c}, -1, 1, seed + 2)}, {"mean", RandomTensor<float>({c}, -0.5, 0.5, seed + 3)},
          {"var", RandomTensor<float>({c}, 0.5, 2, seed + 4)}, {"g", RandomTensor<float>(x, -1, 1, seed + 5)}};
}

std::vector<OpDesc> BatchNormOps(bool is_test, bool global) {
  std::map<std::string, Attribute> attrs = {
      {"momentum", 0.9f}, {"epsilon", 1e-5f}, {"is_test", is_test}, {"use_global_stats", global}};
  OpDesc fwd = MakeOp(
      "batch_norm", {{"X", {"x"}}, {"Scale", {"scale"}}, {"Bias", {"bias"}}, {"Mean", {"mean"}}, {"Variance", {"var"}}},
      {{"Y", {"y"}}, {"MeanOut", {"mean"}}, {"VarianceOut", {"var"}}, {"SavedMean", {"sm"}}, {"SavedVariance", {"sv"}}},
      attrs);
  OpDesc grad = MakeOp("batch_norm_grad",
                       {{"X", {"x"}},
                        {"Scale", {"scale"}},
                        {"Bias", {"bias"}},
                        {"SavedMean", {"sm"}},
                        {"SavedVariance", {"sv"}},
                        {"Y@GRAD", {"g"}}},
                       {{"X@GRAD", {"dx"}}, {"Scale@GRAD", {"dscale"}}, {"Bias@GRAD", {"dbias"}}}, attrs);
  if (is_test) return {fwd};
  return {fwd, grad};
}

// Training mode. Y, the saved statistics, MeanOut and the gradients match
// the CPU's; VarianceOut is cuDNN's (and Fluid's GPU kernel's) update with
// the unbiased batch variance: cpu + (1 − momentum)·var_b/(count − 1).
TEST(CudnnKernelTest, BatchNormTrainingAndGrads) {
  REQUIRE_GPU();
  for (const DDim& x : {DDim{8, 20, 14, 14}, DDim{16, 5}, DDim{3, 4, 5, 2, 3}}) {
    SCOPED_TRACE("X" + x.ToString());
    Scope cpu, gpu;
    ASSERT_TRUE(RunBoth(BatchNormOps(false, false), BatchNormInputs(x, 10), &cpu, &gpu).ok());
    for (const char* name : {"y", "mean", "sm", "sv", "dscale", "dbias"}) ExpectClose<float>(cpu, gpu, name, 1e-4);
    ExpectClose<float>(cpu, gpu, "dx", 1e-4);
    const double count = static_cast<double>(x.numel() / x[1]);
    const Tensor& cpu_var = GetTensor(cpu, "var");
    const Tensor& inv = GetTensor(cpu, "sv");
    Tensor gpu_var = GpuResult(gpu, "var");
    for (int64_t c = 0; c < x[1]; ++c) {
      const double iv = inv.data<float>()[c];
      const double batch_var = 1.0 / (iv * iv) - 1e-5;
      const double want = cpu_var.data<float>()[c] + 0.1 * batch_var / (count - 1);
      EXPECT_NEAR(gpu_var.data<float>()[c], want, 1e-5 + 1e-4 * std::abs(want)) << "VarianceOut[" << c << "]";
    }
  }
}

TEST(CudnnKernelTest, BatchNormWithGlobalStatisticsAndInference) {
  REQUIRE_GPU();
  const DDim x{4, 6, 5, 5};
  Check(BatchNormOps(true, false), BatchNormInputs(x, 20), {"y", "sm", "sv"}, {}, 1e-4);
  Check(BatchNormOps(false, true), BatchNormInputs(x, 30), {"y", "sm", "sv", "dx", "dscale", "dbias"}, {}, 1e-4);
}

std::vector<OpDesc> DropoutOps(float p, bool is_test, const std::string& impl) {
  std::map<std::string, Attribute> attrs = {{"dropout_prob", p},
                                            {"is_test", is_test},
                                            {"fix_seed", true},
                                            {"seed", int32_t{11}},
                                            {"dropout_implementation", impl}};
  return {MakeOp("dropout", {{"X", {"x"}}}, {{"Out", {"y"}}, {"Mask", {"mask"}}}, attrs),
          MakeOp("dropout_grad", {{"Mask", {"mask"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}}, attrs)};
}

// The GPU draws its mask from cuRAND, the CPU from std::mt19937_64: the
// masks differ, so the test checks the rule (Out and X@GRAD are X and
// Out@GRAD times mask times the scale), the drop rate, and that a fixed
// seed repeats its mask. is_test is deterministic and compared directly.
TEST(CudnnKernelTest, DropoutMaskRuleRateSeedAndInference) {
  REQUIRE_GPU();
  const DDim d{100, 100};
  for (const std::string impl : {"upscale_in_train", "downgrade_in_infer"}) {
    SCOPED_TRACE(impl);
    Check(DropoutOps(0.3f, true, impl),
          {{"x", RandomTensor<float>(d, -1, 1, 40)}, {"g", RandomTensor<float>(d, -1, 1, 41)}}, {"y", "dx"});
    std::vector<float> first_mask;
    for (int run = 0; run < 2; ++run) {
      Scope gpu;
      Tensor x = RandomTensor<float>(d, 0.5, 1, 42), g = RandomTensor<float>(d, -1, 1, 43);
      SetTensor(&gpu, "x", x);
      SetTensor(&gpu, "g", g);
      ASSERT_TRUE(RunOpsOn(DropoutOps(0.3f, false, impl), &gpu, CUDAPlace(0)).ok());
      Tensor y = GpuResult(gpu, "y"), mask = GpuResult(gpu, "mask"), dx = GpuResult(gpu, "dx");
      const float k = impl == "upscale_in_train" ? 1.f / 0.7f : 1.f;
      int64_t dropped = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        const float m = mask.data<float>()[i];
        ASSERT_TRUE(m == 0.f || m == 1.f) << "mask[" << i << "] = " << m;
        dropped += m == 0.f;
        ASSERT_FLOAT_EQ(y.data<float>()[i], x.data<float>()[i] * m * k) << i;
        ASSERT_FLOAT_EQ(dx.data<float>()[i], g.data<float>()[i] * m * k) << i;
      }
      // 10000 draws at p = 0.3: the standard deviation of the rate is 0.0046.
      EXPECT_NEAR(static_cast<double>(dropped) / x.numel(), 0.3, 0.03);
      if (run == 0) first_mask = TensorToVector<float>(mask);
      if (run == 1) {
        EXPECT_EQ(first_mask, TensorToVector<float>(mask)) << "seed 11 drew two masks";
      }
    }
  }
}

TEST(CudnnKernelTest, CastIncrementFloorAndPow) {
  REQUIRE_GPU();
  const Tensor x = RandomTensor<float>({7, 9}, -5, 5, 50);
  Check({MakeOp("cast", {{"X", {"x"}}}, {{"Out", {"i"}}},
                {{"in_dtype", static_cast<int32_t>(DataType::kFloat32)},
                 {"out_dtype", static_cast<int32_t>(DataType::kInt64)}}),
         MakeOp("cast", {{"X", {"i"}}}, {{"Out", {"f"}}},
                {{"in_dtype", static_cast<int32_t>(DataType::kInt64)},
                 {"out_dtype", static_cast<int32_t>(DataType::kFloat32)}}),
         MakeOp("floor", {{"X", {"x"}}}, {{"Out", {"fl"}}}),
         MakeOp("floor_grad", {{"X", {"x"}}, {"Out@GRAD", {"x"}}}, {{"X@GRAD", {"dfl"}}})},
        {{"x", x}}, {"f", "fl", "dfl"}, {"i"});
  // In place (Out bound to X), narrower then wider: each writes a buffer of
  // its own, so no thread overwrites an element another has yet to read.
  const auto cast = [](const std::string& v, DataType from, DataType to) {
    return MakeOp("cast", {{"X", {v}}}, {{"Out", {v}}},
                  {{"in_dtype", static_cast<int32_t>(from)}, {"out_dtype", static_cast<int32_t>(to)}});
  };
  Check({MakeOp("cast", {{"X", {"big"}}}, {{"Out", {"w"}}},
                {{"in_dtype", static_cast<int32_t>(DataType::kFloat32)},
                 {"out_dtype", static_cast<int32_t>(DataType::kInt64)}}),
         cast("w", DataType::kInt64, DataType::kFloat32), cast("big", DataType::kFloat32, DataType::kFloat64),
         cast("big", DataType::kFloat64, DataType::kFloat32)},
        {{"big", RandomTensor<float>({1 << 20}, -1000, 1000, 54)}}, {"w", "big"});
  Check({MakeOp("increment", {{"X", {"n"}}}, {{"Out", {"n"}}}, {{"step", 1.f}}),
         MakeOp("increment", {{"X", {"s"}}}, {{"Out", {"s2"}}}, {{"step", 2.5f}})},
        {{"n", MakeTensor<int64_t>({1}, {41})}, {"s", MakeTensor<float>({1}, {0.25f})}}, {"s2"}, {"n"});
  // The learning-rate decay's pow: a positive base to a broadcast exponent.
  OpDesc pow = MakeOp("elementwise_pow", {{"X", {"b"}}, {"Y", {"e"}}}, {{"Out", {"o"}}}, {{"axis", int32_t{-1}}});
  OpDesc pow_grad = MakeOp("elementwise_pow_grad", {{"X", {"b"}}, {"Y", {"e"}}, {"Out@GRAD", {"g"}}},
                           {{"X@GRAD", {"db"}}, {"Y@GRAD", {"de"}}}, {{"axis", int32_t{-1}}});
  Check({pow, pow_grad},
        {{"b", RandomTensor<float>({6, 4}, 0.5, 2, 51)},
         {"e", RandomTensor<float>({4}, -2, 2, 52)},
         {"g", RandomTensor<float>({6, 4}, -1, 1, 53)}},
        {"o", "db", "de"});
}

}  // namespace
}  // namespace oar::testing
