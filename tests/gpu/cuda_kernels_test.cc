// Every GPU kernel against its CPU kernel on the same inputs: forward values
// and gradients, broadcast layouts and odd shapes. Needs a GPU: each test
// skips itself, with the reason, on a host without one. Labelled `gpu`.
// The tolerance is gpu_test_util.h's; the cuDNN ops are in
// cudnn_kernels_test.cc.
#include <cmath>
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace oar::testing {
namespace {

TEST(CudaKernelTest, MulAndGradWithFlattening) {
  REQUIRE_GPU();
  OpDesc fwd = MakeOp("mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}, {{"x_num_col_dims", int32_t{2}}});
  OpDesc grad = MakeOp("mul_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"g"}}},
                       {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}, {{"x_num_col_dims", int32_t{2}}});
  Check({fwd, grad},
        {{"x", RandomTensor<float>({3, 5, 7}, -1, 1, 1)},
         {"y", RandomTensor<float>({7, 9}, -1, 1, 2)},
         {"g", RandomTensor<float>({3, 5, 9}, -1, 1, 3)}},
        {"o", "dx", "dy"});
}

TEST(CudaKernelTest, MulOfFashionMlpShapes) {
  REQUIRE_GPU();
  Check({MakeOp("mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}})},
        {{"x", RandomTensor<float>({128, 784}, 0, 1, 4)}, {"y", RandomTensor<float>({784, 256}, -0.05, 0.05, 5)}},
        {"o"});
}

TEST(CudaKernelTest, BatchedMatmulWithTransposesAndGrad) {
  REQUIRE_GPU();
  for (bool tx : {false, true}) {
    for (bool ty : {false, true}) {
      const DDim xd = tx ? DDim{2, 4, 3} : DDim{2, 3, 4};
      const DDim yd = ty ? DDim{2, 5, 4} : DDim{2, 4, 5};
      std::map<std::string, Attribute> attrs = {{"transpose_X", tx}, {"transpose_Y", ty}, {"alpha", 0.5f}};
      OpDesc fwd = MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}, attrs);
      OpDesc grad = MakeOp("matmul_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"g"}}},
                           {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}, attrs);
      SCOPED_TRACE(::testing::Message() << "tx=" << tx << " ty=" << ty);
      Check({fwd, grad},
            {{"x", RandomTensor<float>(xd, -1, 1, 6)},
             {"y", RandomTensor<float>(yd, -1, 1, 7)},
             {"g", RandomTensor<float>({2, 3, 5}, -1, 1, 8)}},
            {"o", "dx", "dy"});
    }
  }
}

TEST(CudaKernelTest, ElementwiseOpsAndGradsOverBroadcastLayouts) {
  REQUIRE_GPU();
  struct Layout {
    DDim x, y;
    int axis;
  };
  const std::vector<Layout> layouts = {
      {{6, 5}, {6, 5}, -1}, {{7, 3}, {3}, 1}, {{2, 3, 4}, {3}, 1}, {{2, 3, 4}, {3, 1}, 1}, {{5, 1, 3}, {5}, 0}};
  for (const std::string type : {"elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div"}) {
    for (const Layout& l : layouts) {
      SCOPED_TRACE(type + " X" + l.x.ToString() + " Y" + l.y.ToString());
      OpDesc fwd = MakeOp(type, {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}, {{"axis", int32_t{l.axis}}});
      OpDesc grad = MakeOp(type + "_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out", {"o"}}, {"Out@GRAD", {"g"}}},
                           {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}, {{"axis", int32_t{l.axis}}});
      Check({fwd, grad},
            {{"x", RandomTensor<float>(l.x, 0.5, 2, 9)},
             {"y", RandomTensor<float>(l.y, 0.5, 2, 10)},
             {"g", RandomTensor<float>(l.x, -1, 1, 11)}},
            {"o", "dx", "dy"});
    }
  }
}

TEST(CudaKernelTest, ScaleMeanSum) {
  REQUIRE_GPU();
  Check(
      {MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"a"}}}, {{"scale", 2.5f}, {"bias", 1.f}}),
       MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"b"}}},
              {{"scale", -0.5f}, {"bias", 3.f}, {"bias_after_scale", false}}),
       MakeOp("mean", {{"X", {"x"}}}, {{"Out", {"m"}}}),
       MakeOp("mean_grad", {{"X", {"x"}}, {"Out@GRAD", {"mg"}}}, {{"X@GRAD", {"dx"}}}),
       MakeOp("sum", {{"X", {"a", "b", "x"}}}, {{"Out", {"s"}}}), MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"a"}}})},
      {{"x", RandomTensor<float>({1001}, -1, 1, 14)}, {"mg", MakeTensor<float>({1}, {0.75f})}},
      {"b", "m", "dx", "s", "a"});
}

TEST(CudaKernelTest, SoftmaxAndGradOverShortAndLongRows) {
  REQUIRE_GPU();
  for (const DDim& d : {DDim{7, 10}, DDim{3, 1000}, DDim{2, 3, 33}}) {
    SCOPED_TRACE(d.ToString());
    Check({MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"o"}}}),
           MakeOp("softmax_grad", {{"Out", {"o"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}})},
          {{"x", RandomTensor<float>(d, -5, 5, 15)}, {"g", RandomTensor<float>(d, -1, 1, 16)}}, {"o", "dx"});
  }
}

TEST(CudaKernelTest, CrossEntropyHardAndSoftWithGrads) {
  REQUIRE_GPU();
  Tensor probs = RandomTensor<float>({9, 10}, 0.01, 1, 17);
  Check({MakeOp("cross_entropy", {{"X", {"x"}}, {"Label", {"l"}}}, {{"Y", {"y"}}}),
         MakeOp("cross_entropy_grad", {{"X", {"x"}}, {"Label", {"l"}}, {"Y@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}})},
        {{"x", probs}, {"l", Labels(9, 10, 18)}, {"g", RandomTensor<float>({9, 1}, -1, 1, 19)}}, {"y", "dx"});
  std::map<std::string, Attribute> soft = {{"soft_label", true}};
  Check({MakeOp("cross_entropy", {{"X", {"x"}}, {"Label", {"l"}}}, {{"Y", {"y"}}}, soft),
         MakeOp("cross_entropy_grad", {{"X", {"x"}}, {"Label", {"l"}}, {"Y@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}}, soft)},
        {{"x", probs}, {"l", RandomTensor<float>({9, 10}, 0, 1, 20)}, {"g", RandomTensor<float>({9, 1}, -1, 1, 21)}},
        {"y", "dx"});
}

TEST(CudaKernelTest, CrossEntropyNamesALabelOutOfRange) {
  REQUIRE_GPU();
  Scope gpu;
  SetTensor(&gpu, "x", RandomTensor<float>({3, 4}, 0.1, 1, 22));
  SetTensor(&gpu, "l", MakeTensor<int64_t>({3, 1}, {1, 7, 2}));
  absl::Status s =
      RunOpsOn({MakeOp("cross_entropy", {{"X", {"x"}}, {"Label", {"l"}}}, {{"Y", {"y"}}})}, &gpu, CUDAPlace(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("label 7 of row 1"), std::string::npos) << s;
}

TEST(CudaKernelTest, SoftmaxWithCrossEntropyHardIgnoredAndSoftWithGrads) {
  REQUIRE_GPU();
  Tensor logits = RandomTensor<float>({9, 10}, -3, 3, 80);
  Tensor labels = Labels(9, 10, 81);
  // Row 0's label is the ignored one (its loss and gradient are 0).
  std::map<std::string, Attribute> hard = {{"ignore_index", static_cast<int32_t>(labels.data<int64_t>()[0])}};
  std::map<std::string, Attribute> soft = {{"soft_label", true}};
  // Paddle 2.x's cross_entropy(use_softmax=False): the input is already probabilities.
  std::map<std::string, Attribute> no_softmax = {{"use_softmax", false}};
  std::map<std::string, Attribute> soft_no_softmax = {{"use_softmax", false}, {"soft_label", true}};
  for (const auto& [attrs, label] :
       {std::pair{hard, labels}, std::pair{soft, RandomTensor<float>({9, 10}, 0, 1, 82)}, std::pair{no_softmax, labels},
        std::pair{soft_no_softmax, RandomTensor<float>({9, 10}, 0, 1, 82)}}) {
    const bool probs = attrs.count("use_softmax") > 0;
    if (probs) logits = RandomTensor<float>({9, 10}, 0.05, 1, 80);
    Check({MakeOp("softmax_with_cross_entropy", {{"Logits", {"x"}}, {"Label", {"l"}}},
                  {{"Softmax", {"sm"}}, {"Loss", {"loss"}}}, attrs),
           MakeOp("softmax_with_cross_entropy_grad", {{"Label", {"l"}}, {"Softmax", {"sm"}}, {"Loss@GRAD", {"g"}}},
                  {{"Logits@GRAD", {"dx"}}}, attrs)},
          {{"x", logits}, {"l", label}, {"g", RandomTensor<float>({9, 1}, -1, 1, 83)}}, {"sm", "loss", "dx"});
  }
}

// softmax and softmax_with_cross_entropy along a middle axis (Paddle's
// axis attribute): the class axis is permuted last and back.
TEST(CudaKernelTest, SoftmaxFamilyAlongAMiddleAxis) {
  REQUIRE_GPU();
  const DDim x{3, 5, 4};
  std::map<std::string, Attribute> axis = {{"axis", int32_t{1}}};
  Check({MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"o"}}}, axis),
         MakeOp("softmax_grad", {{"Out", {"o"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}}, axis)},
        {{"x", RandomTensor<float>(x, -3, 3, 120)}, {"g", RandomTensor<float>(x, -1, 1, 121)}}, {"o", "dx"});
  Tensor r = RandomTensor<float>({3, 1, 4}, 0, 5, 122);
  std::vector<int64_t> hard;
  for (int64_t i = 0; i < r.numel(); ++i) hard.push_back(static_cast<int64_t>(r.data<float>()[i]) % 5);
  std::map<std::string, Attribute> soft = {{"axis", int32_t{1}}, {"soft_label", true}};
  for (const auto& [attrs, label] :
       {std::pair{axis, MakeTensor<int64_t>({3, 1, 4}, hard)}, std::pair{soft, RandomTensor<float>(x, 0, 1, 123)}}) {
    Check({MakeOp("softmax_with_cross_entropy", {{"Logits", {"x"}}, {"Label", {"l"}}},
                  {{"Softmax", {"sm"}}, {"Loss", {"loss"}}}, attrs),
           MakeOp("softmax_with_cross_entropy_grad", {{"Label", {"l"}}, {"Softmax", {"sm"}}, {"Loss@GRAD", {"g"}}},
                  {{"Logits@GRAD", {"dx"}}}, attrs)},
          {{"x", RandomTensor<float>(x, -3, 3, 124)}, {"l", label}, {"g", RandomTensor<float>({3, 1, 4}, -1, 1, 125)}},
          {"sm", "loss", "dx"});
  }
}

// reduce_sum and reduce_mean over one axis, two, a negative one, every one
// (reduce_all), with and without keep_dim, and their gradients.
TEST(CudaKernelTest, ReduceSumAndMeanOverAxesWithGrads) {
  REQUIRE_GPU();
  const DDim x{3, 4, 5};
  const std::vector<std::vector<int32_t>> axes = {{0}, {1}, {-1}, {0, 2}, {}};
  for (const std::string type : {"reduce_sum", "reduce_mean"}) {
    for (const auto& dim : axes) {
      for (bool keep : {false, true}) {
        SCOPED_TRACE(type + " over " + std::to_string(dim.size()) + " axes, keep_dim " + std::to_string(keep));
        DDim out;
        for (int i = 0; i < x.size(); ++i) {
          bool folded = dim.empty();
          for (int d : dim) folded = folded || (d < 0 ? d + x.size() : d) == i;
          if (!folded)
            out.push_back(x[i]);
          else if (keep)
            out.push_back(1);
        }
        if (out.size() == 0) out = DDim{1};
        std::map<std::string, Attribute> attrs = {{"dim", dim}, {"keep_dim", keep}, {"reduce_all", dim.empty()}};
        Check({MakeOp(type, {{"X", {"x"}}}, {{"Out", {"o"}}}, attrs),
               MakeOp(type + "_grad", {{"X", {"x"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}}, attrs)},
              {{"x", RandomTensor<float>(x, -1, 1, 84)}, {"g", RandomTensor<float>(out, -1, 1, 85)}}, {"o", "dx"});
      }
    }
  }
}

// clip and its gradient (values on both sides of each bound), and
// clip_by_norm above and below its max_norm, in place as gradient clipping
// runs it.
TEST(CudaKernelTest, ClipClipGradAndClipByNorm) {
  REQUIRE_GPU();
  Tensor x = RandomTensor<float>({7, 9}, -2, 2, 86);
  std::map<std::string, Attribute> bounds = {{"min", -0.5f}, {"max", 0.75f}};
  Check({MakeOp("clip", {{"X", {"x"}}}, {{"Out", {"o"}}}, bounds),
         MakeOp("clip_grad", {{"X", {"x"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}}, bounds)},
        {{"x", x}, {"g", RandomTensor<float>({7, 9}, -1, 1, 87)}}, {"o", "dx"});
  for (float max_norm : {1.0f, 100.0f}) {  // ||x|| is about 9: scaled, then not
    SCOPED_TRACE(max_norm);
    Check({MakeOp("clip_by_norm", {{"X", {"x"}}}, {{"Out", {"x"}}}, {{"max_norm", max_norm}})}, {{"x", x}}, {"x"});
  }
}

TEST(CudaKernelTest, TopKWithTiesAndAccuracy) {
  REQUIRE_GPU();
  Tensor x = MakeTensor<float>({3, 5}, {1, 3, 3, 0, 2, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0});
  for (int32_t k : {1, 3}) {
    SCOPED_TRACE(k);
    Check({MakeOp("top_k", {{"X", {"x"}}}, {{"Out", {"v"}}, {"Indices", {"i"}}}, {{"k", k}}),
           MakeOp("accuracy", {{"Out", {"v"}}, {"Indices", {"i"}}, {"Label", {"l"}}},
                  {{"Accuracy", {"acc"}}, {"Correct", {"c"}}, {"Total", {"t"}}})},
          {{"x", x}, {"l", MakeTensor<int64_t>({3, 1}, {2, 0, 4})}}, {"v", "acc"}, {"i"});
  }
}

TEST(CudaKernelTest, OptimizerUpdates) {
  REQUIRE_GPU();
  const DDim d{37, 11};
  Inputs in = {{"p", RandomTensor<float>(d, -1, 1, 23)}, {"g", RandomTensor<float>(d, -1, 1, 24)},
               {"v", RandomTensor<float>(d, -1, 1, 25)}, {"m1", RandomTensor<float>(d, -1, 1, 26)},
               {"m2", RandomTensor<float>(d, 0, 1, 27)}, {"lr", MakeTensor<float>({1}, {0.01f})},
               {"b1p", MakeTensor<float>({1}, {0.81f})}, {"b2p", MakeTensor<float>({1}, {0.998f})}};
  Check({MakeOp("sgd", {{"Param", {"p"}}, {"Grad", {"g"}}, {"LearningRate", {"lr"}}}, {{"ParamOut", {"ps"}}})}, in,
        {"ps"});
  for (bool nesterov : {false, true}) {
    Check({MakeOp("momentum", {{"Param", {"p"}}, {"Grad", {"g"}}, {"Velocity", {"v"}}, {"LearningRate", {"lr"}}},
                  {{"ParamOut", {"pm"}}, {"VelocityOut", {"vm"}}}, {{"mu", 0.9f}, {"use_nesterov", nesterov}})},
          in, {"pm", "vm"});
  }
  Check({MakeOp("adam",
                {{"Param", {"p"}},
                 {"Grad", {"g"}},
                 {"LearningRate", {"lr"}},
                 {"Moment1", {"m1"}},
                 {"Moment2", {"m2"}},
                 {"Beta1Pow", {"b1p"}},
                 {"Beta2Pow", {"b2p"}}},
                {{"ParamOut", {"p"}},
                 {"Moment1Out", {"m1"}},
                 {"Moment2Out", {"m2"}},
                 {"Beta1PowOut", {"b1p"}},
                 {"Beta2PowOut", {"b2p"}}})},
        in, {"p", "m1", "m2", "b1p", "b2p"});
}

TEST(CudaKernelTest, FillAndRandomInitializers) {
  REQUIRE_GPU();
  Check(
      {MakeOp("fill_constant", {}, {{"Out", {"f"}}}, {{"shape", std::vector<int64_t>{3, 7}}, {"value", 2.5f}}),
       MakeOp("fill_constant", {}, {{"Out", {"n"}}},
              {{"shape", std::vector<int64_t>{5}}, {"value", 9.f}, {"dtype", static_cast<int32_t>(DataType::kInt64)}}),
       // Paddle 2.x writes the value as text as well; the text wins.
       MakeOp("fill_constant", {}, {{"Out", {"s"}}},
              {{"shape", std::vector<int64_t>{4}}, {"value", 0.0f}, {"str_value", std::string("0.999")}}),
       MakeOp("fill_constant", {}, {{"Out", {"big"}}},
              {{"shape", std::vector<int64_t>{2}},
               {"value", 0.0f},
               {"str_value", std::string("9007199254740993")},
               {"dtype", static_cast<int32_t>(DataType::kInt64)}})},
      {}, {"f", "s"}, {"n", "big"});
  {  // exactly 2^53 + 1, which a float (or a double) value cannot carry
    Scope gpu;
    ASSERT_TRUE(RunOpsOn({MakeOp("fill_constant", {}, {{"Out", {"big"}}},
                                 {{"shape", std::vector<int64_t>{2}},
                                  {"str_value", std::string("9007199254740993")},
                                  {"dtype", static_cast<int32_t>(DataType::kInt64)}})},
                         &gpu, CUDAPlace(0))
                    .ok());
    Tensor big;
    ASSERT_TRUE(GetTensor(gpu, "big").CopyTo(CPUPlace(), &big).ok());
    EXPECT_EQ(TensorToVector<int64_t>(big), (std::vector<int64_t>{9007199254740993, 9007199254740993}));
  }
  // GPU and CPU draw from different generators: check the range, the
  // moments, and that a seed repeats its draw.
  for (int run = 0; run < 2; ++run) {
    Scope gpu;
    ASSERT_TRUE(
        RunOpsOn({MakeOp("uniform_random", {}, {{"Out", {"u"}}},
                         {{"shape", std::vector<int64_t>{10001}}, {"min", -2.f}, {"max", 3.f}, {"seed", int32_t{7}}}),
                  MakeOp("gaussian_random", {}, {{"Out", {"z"}}},
                         {{"shape", std::vector<int64_t>{10001}}, {"mean", 1.f}, {"std", 2.f}, {"seed", int32_t{7}}})},
                 &gpu, CUDAPlace(0))
            .ok());
    Tensor u, z;
    ASSERT_TRUE(GetTensor(gpu, "u").CopyTo(CPUPlace(), &u).ok());
    ASSERT_TRUE(GetTensor(gpu, "z").CopyTo(CPUPlace(), &z).ok());
    double su = 0, sz = 0, sz2 = 0;
    for (int64_t i = 0; i < u.numel(); ++i) {
      ASSERT_GE(u.data<float>()[i], -2.f);
      ASSERT_LT(u.data<float>()[i], 3.f);
      su += u.data<float>()[i];
      sz += z.data<float>()[i];
      sz2 += z.data<float>()[i] * z.data<float>()[i];
    }
    const double n = static_cast<double>(u.numel()), mz = sz / n;
    EXPECT_NEAR(su / n, 0.5, 0.05);
    EXPECT_NEAR(mz, 1.0, 0.06);
    EXPECT_NEAR(std::sqrt(sz2 / n - mz * mz), 2.0, 0.06);
    static std::vector<float> first;
    if (run == 0) first = TensorToVector<float>(u);
    if (run == 1) {
      EXPECT_EQ(first, TensorToVector<float>(u)) << "seed 7 drew differently twice";
    }
  }
}

TEST(CudaKernelTest, ConcatSplitAndConcatGradAlongEachAxis) {
  REQUIRE_GPU();
  for (int axis : {0, 1, -1}) {
    SCOPED_TRACE(::testing::Message() << "axis " << axis);
    const DDim a = axis == 0 ? DDim{2, 3, 4} : (axis == 1 ? DDim{2, 1, 4} : DDim{2, 3, 2});
    const DDim b = axis == 0 ? DDim{5, 3, 4} : (axis == 1 ? DDim{2, 4, 4} : DDim{2, 3, 5});
    const std::map<std::string, Attribute> attr = {{"axis", int32_t{axis}}};
    Check({MakeOp("concat", {{"X", {"a", "b"}}}, {{"Out", {"c"}}}, attr),
           MakeOp("concat_grad", {{"X", {"a", "b"}}, {"Out@GRAD", {"c"}}}, {{"X@GRAD", {"da", "db"}}}, attr),
           MakeOp("split", {{"X", {"c"}}}, {{"Out", {"s0", "s1"}}},
                  {{"axis", int32_t{axis}},
                   {"sections", std::vector<int32_t>{static_cast<int32_t>(a[axis < 0 ? 2 : axis]),
                                                     static_cast<int32_t>(b[axis < 0 ? 2 : axis])}}})},
          {{"a", RandomTensor<float>(a, -1, 1, 60)}, {"b", RandomTensor<float>(b, -1, 1, 61)}},
          {"c", "da", "db", "s0", "s1"});
  }
}

// Paddle's fallback: an op without a GPU kernel (here
// sigmoid_cross_entropy_with_logits) runs its CPU kernel on the host inside
// a GPU block, and the GPU op after it reads its output: the same values as
// the CPU. (x2 moved to the host for it, where it stays.)
TEST(CudaKernelTest, AnOpWithoutAGpuKernelRunsOnTheHostBetweenGpuOps) {
  REQUIRE_GPU();
  Check({MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"x2"}}}, {{"scale", 2.f}}),
         MakeOp("sigmoid_cross_entropy_with_logits", {{"X", {"x2"}}, {"Label", {"l"}}}, {{"Out", {"o"}}}),
         MakeOp("scale", {{"X", {"o"}}}, {{"Out", {"s"}}}, {{"scale", 3.f}})},
        {{"x", RandomTensor<float>({4, 3}, -1, 1, 28)}, {"l", RandomTensor<float>({4, 3}, 0, 1, 29)}}, {"s"});
}

// numpy's broadcast where Fluid's layout does not fit (Y [1, 4, 3] under X
// [8, 4, 3], as Paddle 2.x's position embeddings): the GPU kernel hands the
// call to the CPU kernel (RunOnHostInstead), forward and backward, and the
// GPU ops after them read the results.
TEST(CudaKernelTest, NumpyBroadcastTheGpuLayoutCannotFitRunsOnTheHost) {
  REQUIRE_GPU();
  Check({MakeOp("elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}, {{"axis", -1}}),
         MakeOp("scale", {{"X", {"o"}}}, {{"Out", {"so"}}}, {{"scale", 2.f}}),
         MakeOp("elementwise_mul_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"g"}}},
                {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}, {{"axis", -1}}),
         MakeOp("scale", {{"X", {"dx"}}}, {{"Out", {"sdx"}}}, {{"scale", 1.f}}),
         MakeOp("scale", {{"X", {"dy"}}}, {{"Out", {"sdy"}}}, {{"scale", 1.f}})},
        {{"x", RandomTensor<float>({8, 4, 3}, -1, 1, 30)},
         {"y", RandomTensor<float>({1, 4, 3}, -1, 1, 31)},
         {"g", RandomTensor<float>({8, 4, 3}, -1, 1, 32)}},
        {"so", "sdx", "sdy"});
}

TEST(CudaKernelTest, CopiesBetweenPlacesRoundTrip) {
  REQUIRE_GPU();
  // 9 MiB + 3 floats: three staging chunks, the last one short.
  Tensor host = RandomTensor<float>({(9 << 20) / 4 + 3}, -1, 1, 29);
  Tensor dev, pinned, back;
  ASSERT_TRUE(host.CopyTo(CUDAPlace(0), &dev).ok());
  ASSERT_TRUE(dev.CopyTo(CUDAPinnedPlace(), &pinned).ok());
  ASSERT_TRUE(pinned.CopyTo(CPUPlace(), &back).ok());
  EXPECT_EQ(TensorToVector<float>(host), TensorToVector<float>(back));
  EXPECT_NE(dev.ToString().find("on CUDAPlace(0)"), std::string::npos) << dev.ToString();
}

}  // namespace
}  // namespace oar::testing
