// Bindings a kernel cannot trust: negative inferred dimensions, a SelectedRows
// in a dense output, an in-place output whose shape would change, a required
// output given as @EMPTY@, a sub-block that runs itself. Each goes through the
// executor's own path (PreparedBlock: check, bind, infer, run) and must be an
// error (or a correct result), not a write through a bad pointer.
#include "common/framework/executor.h"
#include "common/framework/op_registry.h"
#include "common/framework/prepared_block.h"
#include "common/framework/selected_rows.h"
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

absl::Status NegativeOutShape(InferShapeContext& ctx) {
  ctx.SetOutputDim("Out", DDim{-1, 3});
  return absl::OkStatus();
}

absl::Status FillOnes(const ExecutionContext& ctx) {
  Tensor* out = ctx.Output("Out");
  float* p = out->mutable_data<float>();
  std::fill(p, p + out->numel(), 1.0f);
  return absl::OkStatus();
}

TEST(PreparedBlockTest, NegativeInferredDimensionIsAnErrorNamingTheOutput) {
  OpRegistry registry;
  registry.Register("negative_out").Output("Out").SetInferShape(NegativeOutShape).Kernel<float>(FillOnes);
  ProgramDesc p;
  OpDesc* op = p.MutableBlock(0)->AppendOp();
  op->type = "negative_out";
  op->SetOutput("Out", {"o"});
  Scope scope;
  Executor exe(CPUPlace(), {}, &registry);
  auto run = exe.Run(p, &scope);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(run.status().message().find("negative_out: output Out ('o') has shape [-1, 3]"), std::string::npos)
      << run.status();
}

TEST(PreparedBlockTest, DenseKernelWritingASelectedRowsVariableGetsTheInferredShape) {
  Scope s;
  s.Var("o")->GetMutable<SelectedRows>();  // declared sparse, written by a dense kernel
  SetTensor(&s, "x", MakeTensor<float>({4, 8}, std::vector<float>(32, -1.0f)));
  absl::Status st = RunOps({MakeOp("relu", {{"X", {"x"}}}, {{"Out", {"o"}}})}, &s);
  ASSERT_TRUE(st.ok()) << st;
  const Tensor& o = GetTensor(s, "o");
  EXPECT_EQ(o.dims(), (DDim{4, 8}));
  EXPECT_EQ(TensorToVector<float>(o), std::vector<float>(32, 0.0f));
}

TEST(PreparedBlockTest, InPlaceOutputThatWouldChangeShapeIsAnError) {
  Scope s;
  SetTensor(&s, "x", RandomTensor<float>({32, 10}, 0, 1, 1));
  SetTensor(&s, "y", RandomTensor<float>({10}, 0, 1, 2));
  absl::Status st = RunOps({MakeOp("elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"y"}}})}, &s);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("elementwise_add: output Out ('y') is also input Y"), std::string::npos) << st;
  EXPECT_NE(st.message().find("[10] to [32, 10]"), std::string::npos) << st;
  EXPECT_EQ(GetTensor(s, "y").dims(), (DDim{10}));  // left as it was
}

TEST(PreparedBlockTest, InPlaceOutputWithTheSameShapeStillRuns) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 2}, {1, 2, 3, 4}));
  SetTensor(&s, "y", MakeTensor<float>({2}, {10, 20}));
  absl::Status st = RunOps({MakeOp("elementwise_add", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"x"}}})}, &s);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "x")), (std::vector<float>{11, 22, 13, 24}));
}

// A view op may reshape in place (Fluid's inplace pass does this): the
// element count is all that must agree.
TEST(PreparedBlockTest, InPlaceReshapeOfAViewOpStillRuns) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  absl::Status st =
      RunOps({MakeOp("reshape2", {{"X", {"x"}}}, {{"Out", {"x"}}}, {{"shape", std::vector<int32_t>{3, 2}}})}, &s);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(GetTensor(s, "x").dims(), (DDim{3, 2}));
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "x")), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

// And so may a view op's grad (Fluid declares X@GRAD on Out@GRAD in place
// for reshape2_grad and its kin).
TEST(PreparedBlockTest, InPlaceReshapeOfAViewGradStillRuns) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  SetTensor(&s, "g", MakeTensor<float>({3, 2}, {6, 5, 4, 3, 2, 1}));
  absl::Status st = RunOps({MakeOp("reshape2", {{"X", {"x"}}}, {{"Out", {"y"}}, {"XShape", {"xs"}}},
                                   {{"shape", std::vector<int32_t>{3, 2}}}),
                            MakeOp("reshape2_grad", {{"XShape", {"xs"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"g"}}},
                                   {{"shape", std::vector<int32_t>{3, 2}}})},
                           &s);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(GetTensor(s, "g").dims(), (DDim{2, 3}));
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "g")), (std::vector<float>{6, 5, 4, 3, 2, 1}));
}

// Ops whose kernels overwrite input they have yet to read refuse an output
// bound to an input, naming both, rather than compute wrong values: a
// square transpose would read cells it already wrote, a square GEMM would
// write over its own operand, a grad would zero dOut before reading it.
TEST(PreparedBlockTest, OpsThatCannotRunInPlaceRefuseIt) {
  struct Case {
    OpDesc op;
    std::string want;
  };
  const std::vector<Case> cases = {
      {MakeOp("transpose2", {{"X", {"x"}}}, {{"Out", {"x"}}}, {{"axis", std::vector<int32_t>{1, 0}}}),
       "transpose2: output Out ('x') is also input X"},
      {MakeOp("mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"y"}}}), "mul: output Out ('y') is also input Y"},
      {MakeOp("conv2d", {{"Input", {"x"}}, {"Filter", {"y"}}}, {{"Output", {"x"}}}),
       "conv2d: output Output ('x') is also input Input"},
      {MakeOp("top_k", {{"X", {"x"}}}, {{"Out", {"x"}}, {"Indices", {"i"}}}, {{"k", int32_t{3}}}),
       "top_k: output Out ('x') is also input X"},
      {MakeOp("elementwise_mul_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"g"}}},
              {{"X@GRAD", {"g"}}, {"Y@GRAD", {"dy"}}}),
       "elementwise_mul_grad: output X@GRAD ('g') is also input Out@GRAD"},
  };
  for (const Case& c : cases) {
    Scope s;
    SetTensor(&s, "x", MakeTensor<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}));
    SetTensor(&s, "y", MakeTensor<float>({3, 3}, {9, 8, 7, 6, 5, 4, 3, 2, 1}));
    SetTensor(&s, "g", MakeTensor<float>({3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}));
    absl::Status st = RunOps({c.op}, &s);
    ASSERT_FALSE(st.ok()) << c.op.type;
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(c.want), std::string::npos) << st;
    EXPECT_NE(st.message().find("cannot run in place"), std::string::npos) << st;
    EXPECT_EQ(TensorToVector<float>(GetTensor(s, "x")), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  }
  // Add's grad, Fluid's in-place pair, still runs so: dX is dOut itself.
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({2, 2}, {1, 2, 3, 4}));
  SetTensor(&s, "y", MakeTensor<float>({2}, {5, 6}));
  SetTensor(&s, "g", MakeTensor<float>({2, 2}, {1, 2, 3, 4}));
  absl::Status st = RunOps({MakeOp("elementwise_add_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"g"}}},
                                   {{"X@GRAD", {"g"}}, {"Y@GRAD", {"dy"}}})},
                           &s);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "g")), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "dy")), (std::vector<float>{4, 6}));
}

// A comparison may write its bool Out over its own X: each element is read
// before its (narrower) result is written, whether or not the buffer moves.
TEST(PreparedBlockTest, InPlaceComparisonWritesBoolsOverItsInput) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<double>({5}, {-2, 0.5, 1, 3, -0.25}));
  SetTensor(&s, "y", MakeTensor<double>({1}, {0.75}));
  absl::Status st = RunOps({MakeOp("less_than", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"x"}}})}, &s);
  ASSERT_TRUE(st.ok()) << st;
  const Tensor& out = GetTensor(s, "x");
  EXPECT_EQ(out.dtype(), DataType::kBool);
  EXPECT_EQ(out.dims(), (DDim{5}));
  const std::vector<bool> want = {true, true, false, false, true};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(out.data<bool>()[i], want[i]) << i;
}

TEST(PreparedBlockTest, RequiredOutputGivenAsEmptyIsAnErrorAtCheckTime) {
  for (const OpDesc& op : {MakeOp("mean", {{"X", {"x"}}}, {{"Out", {kEmptyVarName}}}),
                           MakeOp("split", {{"X", {"x"}}}, {{"Out", {"a", kEmptyVarName}}}, {{"num", int32_t{2}}})}) {
    ProgramDesc p;
    *p.MutableBlock(0)->AppendOp() = op;
    auto prepared = Executor().Prepare(p, 0);
    ASSERT_FALSE(prepared.ok()) << op.type;
    EXPECT_EQ(prepared.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(prepared.status().message().find(op.type + ": required output slot 'Out' has @EMPTY@"), std::string::npos)
        << prepared.status();
  }
}

// A conditional_block whose sub_block is its own block (or an ancestor)
// recursed until the stack ran out.
TEST(ControlOpsTest, ConditionalBlockThatRunsItsOwnBlockIsAnError) {
  for (int cycle_len : {1, 2}) {
    ProgramDesc p;
    BlockDesc* sub = p.AppendBlock(0);
    auto add_cond = [](BlockDesc* b, int32_t target) {
      OpDesc* op = b->AppendOp();
      op->type = "conditional_block";
      op->SetInput("Cond", {"c"});
      op->SetAttr("sub_block", BlockRef{target});
      op->SetAttr("is_scalar_condition", true);
    };
    if (cycle_len == 1) {
      add_cond(p.MutableBlock(0), 0);
    } else {
      add_cond(p.MutableBlock(0), 1);
      add_cond(sub, 0);
    }
    Scope s;
    SetTensor(&s, "c", MakeTensor<bool>({1}, {true}));
    auto run = Executor().Run(p, &s);
    ASSERT_FALSE(run.ok()) << "cycle of " << cycle_len;
    EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(run.status().message().find("conditional_block: sub_block 0 is already running"), std::string::npos)
        << run.status();
  }
}

}  // namespace
}  // namespace oar::testing
