// sequence_pool on the GPU (every pooltype, forward and gradient, an empty
// sequence and rows wider than one column) against its CPU kernel, a
// MaxIndex outside its sequence named as on the CPU; and auc, a host-side
// op, in a GPU program: its Predict comes from a GPU op, it runs on the
// host and its AUC over two steps (histograms kept between them) is the
// CPU's. Needs a GPU: each test skips itself, with the reason, on a
// host without one. Labelled `gpu`. Tolerance: gpu_test_util.h's (sums of
// at most four rows).
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace oar::testing {
namespace {

// Four sequences of lengths 2, 0, 3 and 1 over [6, 2, 3] rows.
Tensor Sequences() {
  Tensor x = RandomTensor<float>({6, 2, 3}, -2, 2, 60);
  x.set_lod({{0, 2, 2, 5, 6}});
  return x;
}

TEST(CudaSequenceKernelTest, SequencePoolOfEachTypeAndItsGradient) {
  REQUIRE_GPU();
  for (const std::string type : {"SUM", "AVERAGE", "SQRT", "MAX", "FIRST", "LAST"}) {
    SCOPED_TRACE(type);
    const std::map<std::string, Attribute> attrs = {{"pooltype", type}, {"pad_value", -1.5f}};
    Scope cpu, gpu;
    absl::Status s = RunBoth(
        {MakeOp("sequence_pool", {{"X", {"x"}}}, {{"Out", {"o"}}, {"MaxIndex", {"mi"}}}, attrs),
         MakeOp("sequence_pool_grad", {{"X", {"x"}}, {"MaxIndex", {"mi"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}},
                attrs)},
        {{"x", Sequences()}, {"g", RandomTensor<float>({4, 2, 3}, -1, 1, 61)}}, &cpu, &gpu);
    ASSERT_TRUE(s.ok()) << s;
    ExpectClose<float>(cpu, gpu, "o");
    ExpectClose<float>(cpu, gpu, "dx");
    if (type == "MAX") ExpectClose<int32_t>(cpu, gpu, "mi", 0, 0);
    EXPECT_EQ(GpuResult(gpu, "dx").lod(), Sequences().lod());
  }
}

TEST(CudaSequenceKernelTest, AMaxIndexOutsideItsSequenceIsNamed) {
  REQUIRE_GPU();
  Scope gpu;
  SetTensor(&gpu, "x", Sequences());
  SetTensor(&gpu, "g", RandomTensor<float>({4, 2, 3}, -1, 1, 62));
  // Sequence 2 holds rows [2, 5): row 1 is not one of them.
  std::vector<int32_t> mi(24, 0);
  for (int i = 12; i < 18; ++i) mi[i] = 3;
  for (int i = 18; i < 24; ++i) mi[i] = 5;
  mi[14] = 1;
  SetTensor(&gpu, "mi", MakeTensor<int32_t>({4, 2, 3}, mi));
  const std::map<std::string, Attribute> attrs = {{"pooltype", std::string("MAX")}};
  absl::Status s = RunOpsOn({MakeOp("sequence_pool_grad", {{"X", {"x"}}, {"MaxIndex", {"mi"}}, {"Out@GRAD", {"g"}}},
                                    {{"X@GRAD", {"dx"}}}, attrs)},
                            &gpu, CUDAPlace(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("MaxIndex 1 at [2, 2]"), std::string::npos) << s;
}

TEST(CudaSequenceKernelTest, AucRunsOnTheHostInAGpuProgram) {
  REQUIRE_GPU();
  const std::map<std::string, Attribute> attrs = {{"num_thresholds", int32_t{200}}, {"slide_steps", int32_t{0}}};
  auto auc = [&](const std::string& p, const std::string& l, const std::string& out) {
    return MakeOp("auc", {{"Predict", {p}}, {"Label", {l}}, {"StatPos", {"pos"}}, {"StatNeg", {"neg"}}},
                  {{"AUC", {out}}, {"StatPosOut", {"pos"}}, {"StatNegOut", {"neg"}}}, attrs);
  };
  // scale by 1 (exact) puts each Predict on the GPU, as a model's softmax would.
  const std::map<std::string, Attribute> one = {{"scale", 1.f}};
  const std::vector<OpDesc> ops = {MakeOp("scale", {{"X", {"z1"}}}, {{"Out", {"p1"}}}, one), auc("p1", "y1", "a1"),
                                   MakeOp("scale", {{"X", {"z2"}}}, {{"Out", {"p2"}}}, one), auc("p2", "y2", "a2")};
  Scope cpu, gpu;
  absl::Status s = RunBoth(ops,
                           {{"z1", RandomTensor<float>({16, 2}, 0, 1, 63)}, {"y1", Labels(16, 2, 64)},
                            {"z2", RandomTensor<float>({16, 2}, 0, 1, 65)}, {"y2", Labels(16, 2, 66)},
                            {"pos", MakeTensor<int64_t>({1, 201}, std::vector<int64_t>(201, 0))},
                            {"neg", MakeTensor<int64_t>({1, 201}, std::vector<int64_t>(201, 0))}},
                           &cpu, &gpu);
  ASSERT_TRUE(s.ok()) << s;
  for (const std::string name : {"a1", "a2"}) {
    const Tensor& got = GetTensor(gpu, name);
    ASSERT_TRUE(got.place() == CPUPlace()) << name << " is on " << got.place().ToString();
    EXPECT_EQ(got.data<double>()[0], GetTensor(cpu, name).data<double>()[0]) << name;
  }
  EXPECT_TRUE(GetTensor(gpu, "p2").place() == CUDAPlace(0)) << "Predict was not made on the GPU";
}

}  // namespace
}  // namespace oar::testing
