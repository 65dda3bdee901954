// The GPU kernels of the ops programs written by PaddlePaddle 2.x (and
// Fluid 1.6+) use beyond the Fluid 1.x layers, against their CPU kernels:
// matmul_v2 with equal batches, a matrix shared by a batch on either side,
// vectors and transposes, and its gradients; transpose2 and its gradient;
// cross_entropy2 (ignore_index) and its gradient; top_k_v2. Needs a GPU:
// each test skips itself, with the reason, on a host without one. Labelled
// `gpu`. Tolerance: gpu_test_util.h's.
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace oar::testing {
namespace {

TEST(CudaPaddleOpsKernelTest, MatmulV2OverBatchesSharedMatricesVectorsAndTransposes) {
  REQUIRE_GPU();
  struct Case {
    DDim x, y, out;
    bool tx = false, ty = false;
  };
  const std::vector<Case> cases = {
      {{3, 4, 6}, {3, 6, 5}, {3, 4, 5}},           // equal batches
      {{3, 4, 6}, {6, 5}, {3, 4, 5}},              // Y shared by the batch
      {{4, 6}, {3, 6, 5}, {3, 4, 5}},              // X shared
      {{3, 6, 4}, {5, 6}, {3, 4, 5}, true, true},  // shared, both transposed
      {{3, 4, 6}, {6}, {3, 4}},                    // Y a vector
      {{6}, {6, 5}, {5}},                          // X a vector
      {{6}, {6}, {}},                              // two vectors: a scalar
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.x.ToString() + " x " + c.y.ToString());
    std::map<std::string, Attribute> attrs = {{"trans_x", c.tx}, {"trans_y", c.ty}};
    Check({MakeOp("matmul_v2", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}, attrs),
           MakeOp("matmul_v2_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"g"}}},
                  {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}, attrs)},
          {{"x", RandomTensor<float>(c.x, -1, 1, 100)},
           {"y", RandomTensor<float>(c.y, -1, 1, 101)},
           {"g", RandomTensor<float>(c.out, -1, 1, 102)}},
          {"o", "dx", "dy"});
  }
}

TEST(CudaPaddleOpsKernelTest, Transpose2AndItsGradient) {
  REQUIRE_GPU();
  for (const std::vector<int32_t>& axis :
       {std::vector<int32_t>{1, 0}, std::vector<int32_t>{0, 2, 3, 1}, std::vector<int32_t>{3, 1, 0, 2}}) {
    const DDim x = axis.size() == 2 ? DDim{5, 7} : DDim{2, 3, 4, 5};
    DDim out;
    for (int32_t a : axis) out.push_back(x[a]);
    SCOPED_TRACE(out.ToString());
    std::map<std::string, Attribute> attrs = {{"axis", axis}};
    Check({MakeOp("transpose2", {{"X", {"x"}}}, {{"Out", {"o"}}, {"XShape", {"xs"}}}, attrs),
           MakeOp("transpose2_grad", {{"XShape", {"xs"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}}, attrs)},
          {{"x", RandomTensor<float>(x, -1, 1, 103)}, {"g", RandomTensor<float>(out, -1, 1, 104)}}, {"o", "dx"});
  }
}

TEST(CudaPaddleOpsKernelTest, CrossEntropy2WithAnIgnoredRowAndItsGradient) {
  REQUIRE_GPU();
  Tensor labels = Labels(9, 10, 105);
  std::map<std::string, Attribute> attrs = {{"ignore_index", static_cast<int32_t>(labels.data<int64_t>()[2])}};
  Check({MakeOp("cross_entropy2", {{"X", {"x"}}, {"Label", {"l"}}},
                {{"Y", {"y"}}, {"MatchX", {"m"}}, {"XShape", {"xs"}}}, attrs),
         MakeOp("cross_entropy_grad2", {{"Label", {"l"}}, {"MatchX", {"m"}}, {"XShape", {"xs"}}, {"Y@GRAD", {"g"}}},
                {{"X@GRAD", {"dx"}}}, attrs)},
        {{"x", RandomTensor<float>({9, 10}, 0.01, 1, 106)},
         {"l", labels},
         {"g", RandomTensor<float>({9, 1}, -1, 1, 107)}},
        {"y", "m", "dx"});
  Scope gpu;
  SetTensor(&gpu, "x", RandomTensor<float>({3, 4}, 0.1, 1, 108));
  SetTensor(&gpu, "l", MakeTensor<int64_t>({3, 1}, {1, 7, 2}));
  absl::Status s = RunOpsOn({MakeOp("cross_entropy2", {{"X", {"x"}}, {"Label", {"l"}}},
                                    {{"Y", {"y"}}, {"MatchX", {"m"}}, {"XShape", {"xs"}}})},
                            &gpu, CUDAPlace(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("label 7 of row 1"), std::string::npos) << s;
}

TEST(CudaPaddleOpsKernelTest, TopKV2) {
  REQUIRE_GPU();
  Tensor x = MakeTensor<float>({3, 5}, {1, 3, 3, 0, 2, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0});
  Check({MakeOp("top_k_v2", {{"X", {"x"}}}, {{"Out", {"v"}}, {"Indices", {"i"}}}, {{"k", int32_t{2}}})}, {{"x", x}},
        {"v"}, {"i"});
}

}  // namespace
}  // namespace oar::testing
