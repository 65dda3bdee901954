// sequence_pool on the GPU (every pooltype, forward and gradient, an empty
// sequence and rows wider than one column) against its CPU kernel, a
// MaxIndex outside its sequence named as on the CPU; and host-side ops in a
// GPU program: auc, whose Predict comes from a GPU op and whose AUC over
// two steps (histograms kept between them) is the CPU's, and the
// distributed lookup table's split_ids and merge_ids. Needs a GPU: each test skips itself, with the reason, on a
// host without one. Labelled `gpu`. Tolerance: gpu_test_util.h's (sums of
// at most four rows).
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace oar::testing {
namespace {

// Four sequences of lengths 2, 0, 3 and 1 over [6, 2, 3] rows, in two
// groups of two (Out keeps the outer level).
Tensor Sequences() {
  Tensor x = RandomTensor<float>({6, 2, 3}, -2, 2, 60);
  x.set_lod({{0, 2, 4}, {0, 2, 2, 5, 6}});
  return x;
}

TEST(CudaSequenceKernelTest, SequencePoolOfEachTypeAndItsGradient) {
  REQUIRE_GPU();
  for (const std::string type : {"SUM", "AVERAGE", "SQRT", "MAX", "FIRST", "LAST"}) {
    SCOPED_TRACE(type);
    const std::map<std::string, Attribute> attrs = {{"pooltype", type}, {"pad_value", -1.5f}};
    Scope cpu, gpu;
    absl::Status s = RunBoth({MakeOp("sequence_pool", {{"X", {"x"}}}, {{"Out", {"o"}}, {"MaxIndex", {"mi"}}}, attrs),
                              MakeOp("sequence_pool_grad", {{"X", {"x"}}, {"MaxIndex", {"mi"}}, {"Out@GRAD", {"g"}}},
                                     {{"X@GRAD", {"dx"}}}, attrs)},
                             {{"x", Sequences()}, {"g", RandomTensor<float>({4, 2, 3}, -1, 1, 61)}}, &cpu, &gpu);
    ASSERT_TRUE(s.ok()) << s;
    ExpectClose<float>(cpu, gpu, "o");
    ExpectClose<float>(cpu, gpu, "dx");
    if (type == "MAX") ExpectClose<int32_t>(cpu, gpu, "mi", 0, 0);
    EXPECT_EQ(GpuResult(gpu, "o").lod(), (LoD{{0, 2, 4}}));
    EXPECT_EQ(GpuResult(gpu, "dx").lod(), Sequences().lod());
  }
  // MAX without a MaxIndex output (inference).
  Check({MakeOp("sequence_pool", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"pooltype", std::string("MAX")}})},
        {{"x", Sequences()}}, {"o"});
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
  mi[20] = 0;  // also outside (sequence 3 is row 5), later: the first one is named
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
  // As a program would: the counts zeroed by fill_constant, each Predict
  // made by an op (scale by 1, exact) on the GPU.
  const std::map<std::string, Attribute> zeros = {
      {"shape", std::vector<int64_t>{1, 201}}, {"dtype", static_cast<int32_t>(DataType::kInt64)}, {"value", 0.f}};
  const std::map<std::string, Attribute> one = {{"scale", 1.f}};
  const std::vector<OpDesc> make = {MakeOp("fill_constant", {}, {{"Out", {"pos"}}}, zeros),
                                    MakeOp("fill_constant", {}, {{"Out", {"neg"}}}, zeros),
                                    MakeOp("scale", {{"X", {"z1"}}}, {{"Out", {"p1"}}}, one),
                                    MakeOp("scale", {{"X", {"z2"}}}, {{"Out", {"p2"}}}, one)};
  const std::vector<OpDesc> metric = {auc("p1", "y1", "a1"), auc("p2", "y2", "a2")};
  const Inputs inputs = {{"z1", RandomTensor<float>({16, 2}, 0, 1, 63)},
                         {"y1", Labels(16, 2, 64)},
                         {"z2", RandomTensor<float>({16, 2}, 0, 1, 65)},
                         {"y2", Labels(16, 2, 66)}};
  Scope cpu, gpu;
  std::vector<OpDesc> all = make;
  all.insert(all.end(), metric.begin(), metric.end());
  absl::Status s = RunBoth(all, inputs, &cpu, &gpu);
  ASSERT_TRUE(s.ok()) << s;
  Scope gpu2;  // the same on the GPU in two runs, to see where each piece lives
  for (const auto& [name, t] : inputs) SetTensor(&gpu2, name, t);
  s = RunOpsOn(make, &gpu2, CUDAPlace(0));
  ASSERT_TRUE(s.ok()) << s;
  for (const std::string name : {"pos", "p1", "p2"}) {
    EXPECT_TRUE(GetTensor(gpu2, name).place() == CUDAPlace(0)) << name << " was not made on the GPU";
  }
  s = RunOpsOn(metric, &gpu2, CUDAPlace(0));
  ASSERT_TRUE(s.ok()) << s;
  for (const Scope* s : {&gpu, &gpu2}) {
    for (const std::string name : {"a1", "a2"}) {
      const Tensor& got = GetTensor(*s, name);
      ASSERT_TRUE(got.place() == CPUPlace()) << name << " is on " << got.place().ToString();
      EXPECT_EQ(got.data<double>()[0], GetTensor(cpu, name).data<double>()[0]) << name;
    }
  }
}

// The distributed lookup table's trainer-side ops around prefetch and send:
// split_ids cuts a sparse gradient made on the GPU (lookup_table_grad) by
// pserver, and merge_ids' rows feed a GPU op; both run on the host.
TEST(CudaSequenceKernelTest, SplitAndMergeIdsRunOnTheHostInAGpuProgram) {
  REQUIRE_GPU();
  Scope gpu;
  SetTensor(&gpu, "w", RandomTensor<float>({10, 2}, -1, 1, 67));
  SetTensor(&gpu, "ids", MakeTensor<int64_t>({4, 1}, {3, 4, 3, 6}));
  SetTensor(&gpu, "g", MakeTensor<float>({4, 2}, {1, 1, 2, 2, 3, 3, 4, 4}));
  SetTensor(&gpu, "r0", MakeTensor<int64_t>({2, 1}, {4, 6}));
  SetTensor(&gpu, "r1", MakeTensor<int64_t>({1, 1}, {3}));
  SetTensor(&gpu, "x0", MakeTensor<float>({2, 2}, {40, 41, 60, 61}));
  SetTensor(&gpu, "x1", MakeTensor<float>({1, 2}, {30, 31}));
  const std::map<std::string, Attribute> sparse = {{"is_sparse", true}};
  absl::Status s = RunOpsOn(
      {MakeOp("lookup_table_grad", {{"W", {"w"}}, {"Ids", {"ids"}}, {"Out@GRAD", {"g"}}}, {{"W@GRAD", {"dw"}}}, sparse),
       MakeOp("split_ids", {{"Ids", {"dw"}}}, {{"Out", {"dw0", "dw1"}}}),
       MakeOp("merge_ids", {{"Ids", {"ids"}}, {"Rows", {"r0", "r1"}}, {"X", {"x0", "x1"}}}, {{"Out", {"emb"}}}),
       MakeOp("scale", {{"X", {"emb"}}}, {{"Out", {"emb2"}}}, {{"scale", 2.f}})},
      &gpu, CUDAPlace(0));
  ASSERT_TRUE(s.ok()) << s;
  const SelectedRows& dw0 = gpu.FindVar("dw0")->Get<SelectedRows>();
  const SelectedRows& dw1 = gpu.FindVar("dw1")->Get<SelectedRows>();
  EXPECT_EQ(dw0.rows, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(dw1.rows, (std::vector<int64_t>{3, 3}));
  ASSERT_TRUE(dw0.value.place() == CPUPlace()) << dw0.value.place().ToString();
  EXPECT_EQ(TensorToVector<float>(dw0.value), (std::vector<float>{2, 2, 4, 4}));
  EXPECT_EQ(TensorToVector<float>(dw1.value), (std::vector<float>{1, 1, 3, 3}));
  EXPECT_EQ(TensorToVector<float>(GpuResult(gpu, "emb2")), (std::vector<float>{60, 62, 80, 82, 60, 62, 120, 122}));
}

}  // namespace
}  // namespace oar::testing
