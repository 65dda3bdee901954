// The GPU kernels of embeddings and sparse gradients against their CPU
// kernels on the same inputs: lookup_table with padding_idx and repeated
// ids, its dense and sparse (SelectedRows) gradients, an id outside the
// table named as on the CPU, sum, merge_selected_rows and scale over sparse
// gradients, and sgd, momentum, adam and lazy adam from a sparse gradient
// with a repeated row. Needs a GPU: each test skips itself,
// with the reason, on a host without one. Labelled `gpu`.
//
// Tolerance: gpu_test_util.h's. The GPU adds a repeated row's values with
// atomics, in no fixed order: a sum of two or three terms, far inside it.
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace oar::testing {
namespace {

Tensor Ids(const DDim& d, const std::vector<int64_t>& v) { return MakeTensor<int64_t>(d, v); }

// A sparse gradient's rows and values, the values brought to the host.
std::pair<std::vector<int64_t>, std::vector<float>> RowsOf(const Scope& scope, const std::string& name) {
  const Variable* v = scope.FindVar(name);
  EXPECT_TRUE(v != nullptr && v->IsType<SelectedRows>()) << name;
  if (v == nullptr || !v->IsType<SelectedRows>()) return {};
  const SelectedRows& sr = v->Get<SelectedRows>();
  Tensor host;
  EXPECT_TRUE(sr.value.CopyTo(CPUPlace(), &host).ok());
  return {sr.rows, TensorToVector<float>(host)};
}

// A SelectedRows variable in `scope` (values on the host: the executor
// moves them to the kernel's place).
void PutRows(Scope* scope, const std::string& name, int64_t height, const std::vector<int64_t>& rows,
             const Tensor& value) {
  SelectedRows* s = scope->Var(name)->GetMutable<SelectedRows>();
  s->height = height;
  s->rows = rows;
  s->value.CopyFrom(value);
}

// sum of sparse inputs (joined rows), of dense and sparse (a dense sum), and
// merge_selected_rows (sorted unique rows, repeated ones summed), as a
// tied embedding's gradients are.
TEST(CudaSparseKernelTest, SumsOfSparseGradientsAndMergeSelectedRows) {
  REQUIRE_GPU();
  const Tensor a = RandomTensor<float>({3, 4}, -1, 1, 110), b = RandomTensor<float>({2, 4}, -1, 1, 111);
  const Tensor d = RandomTensor<float>({6, 4}, -1, 1, 112);
  auto fill = [&](Scope* scope) {
    PutRows(scope, "a", 6, {4, 1, 4}, a);
    PutRows(scope, "b", 6, {0, 4}, b);
    PutRows(scope, "empty", 6, {}, Tensor());
    SetTensor(scope, "d", d);
  };
  Scope cpu, gpu;
  fill(&cpu);
  fill(&gpu);
  const std::vector<OpDesc> ops = {MakeOp("sum", {{"X", {"a", "empty", "b"}}}, {{"Out", {"s"}}}),
                                   MakeOp("sum", {{"X", {"a", "d", "b"}}}, {{"Out", {"dense"}}}),
                                   MakeOp("merge_selected_rows", {{"X", {"s"}}}, {{"Out", {"m"}}})};
  ASSERT_TRUE(RunOpsOn(ops, &cpu, CPUPlace()).ok());
  absl::Status st = RunOpsOn(ops, &gpu, CUDAPlace(0));
  ASSERT_TRUE(st.ok()) << st;
  const auto s_cpu = RowsOf(cpu, "s"), s_gpu = RowsOf(gpu, "s");
  EXPECT_EQ(s_gpu.first, (std::vector<int64_t>{4, 1, 4, 0, 4}));
  EXPECT_EQ(s_gpu, s_cpu);  // copies
  ExpectClose<float>(cpu, gpu, "dense");
  const auto m_cpu = RowsOf(cpu, "m"), m_gpu = RowsOf(gpu, "m");
  EXPECT_EQ(m_gpu.first, (std::vector<int64_t>{0, 1, 4}));
  ASSERT_EQ(m_gpu.second.size(), m_cpu.second.size());
  for (size_t i = 0; i < m_cpu.second.size(); ++i) EXPECT_NEAR(m_gpu.second[i], m_cpu.second[i], 1e-6) << i;
}

// scale of a sparse gradient (gradient averaging, regularization): the
// same rows, the values scaled; out of place and in place.
TEST(CudaSparseKernelTest, ScaleOfASparseGradientKeepsItsRows) {
  REQUIRE_GPU();
  const Tensor v = RandomTensor<float>({3, 4}, -1, 1, 113);
  Scope cpu, gpu;
  for (Scope* scope : {&cpu, &gpu}) {
    PutRows(scope, "g", 6, {4, 1, 4}, v);
    PutRows(scope, "h", 6, {2, 5, 0}, v);
  }
  const std::vector<OpDesc> ops = {
      MakeOp("scale", {{"X", {"g"}}}, {{"Out", {"s"}}}, {{"scale", 0.5f}, {"bias", 1.f}}),
      MakeOp("scale", {{"X", {"h"}}}, {{"Out", {"h"}}}, {{"scale", -2.f}, {"bias_after_scale", false}, {"bias", 3.f}})};
  ASSERT_TRUE(RunOpsOn(ops, &cpu, CPUPlace()).ok());
  absl::Status st = RunOpsOn(ops, &gpu, CUDAPlace(0));
  ASSERT_TRUE(st.ok()) << st;
  // The closed form, and X left as it was by the out-of-place scale.
  const std::vector<float> vs = TensorToVector<float>(v);
  const auto s = RowsOf(gpu, "s"), g = RowsOf(gpu, "g");
  ASSERT_EQ(s.second.size(), vs.size());
  for (size_t i = 0; i < vs.size(); ++i) EXPECT_NEAR(s.second[i], 0.5f * vs[i] + 1.f, 1e-6) << i;
  EXPECT_EQ(g.second, vs);
  for (const std::string name : {"s", "h"}) {
    const auto want = RowsOf(cpu, name), got = RowsOf(gpu, name);
    EXPECT_EQ(got.first, want.first) << name;
    EXPECT_EQ(gpu.FindVar(name)->Get<SelectedRows>().height, 6) << name;
    ASSERT_EQ(got.second.size(), want.second.size()) << name;
    for (size_t i = 0; i < want.second.size(); ++i) EXPECT_NEAR(got.second[i], want.second[i], 1e-6) << name << i;
  }
}

TEST(CudaSparseKernelTest, LookupTableAndItsDenseGradWithPaddingAndRepeatedIds) {
  REQUIRE_GPU();
  for (const std::string type : {"lookup_table", "lookup_table_v2"}) {
    SCOPED_TRACE(type);
    const bool v2 = type == "lookup_table_v2";
    Tensor ids = v2 ? Ids({2, 3}, {4, 1, 3, 4, 9, 0}) : Ids({6, 1}, {4, 1, 3, 4, 9, 0});
    const DDim out = v2 ? DDim{2, 3, 5} : DDim{6, 5};
    std::map<std::string, Attribute> attrs = {{"padding_idx", int64_t{3}}};
    // A negative padding_idx (a program Fluid wrote; our layers make it
    // positive) marks ids of that value, which are outside the table.
    std::map<std::string, Attribute> negative = {{"padding_idx", int64_t{-2}}};
    Tensor neg_ids = v2 ? Ids({2, 3}, {4, -2, 3, 4, 9, -2}) : Ids({6, 1}, {4, -2, 3, 4, 9, -2});
    for (bool sparse : {false, true}) {
      negative["is_sparse"] = sparse;
      Check({MakeOp(type, {{"W", {"w"}}, {"Ids", {"ids"}}}, {{"Out", {"o"}}}, negative),
             MakeOp(type + "_grad", {{"W", {"w"}}, {"Ids", {"ids"}}, {"Out@GRAD", {"g"}}}, {{"W@GRAD", {"dw"}}},
                    negative)},
            {{"w", RandomTensor<float>({10, 5}, -1, 1, 70)},
             {"ids", neg_ids},
             {"g", RandomTensor<float>(out, -1, 1, 71)}},
            sparse ? std::vector<std::string>{"o"} : std::vector<std::string>{"o", "dw"});
    }
    Check({MakeOp(type, {{"W", {"w"}}, {"Ids", {"ids"}}}, {{"Out", {"o"}}}, attrs),
           MakeOp(type + "_grad", {{"W", {"w"}}, {"Ids", {"ids"}}, {"Out@GRAD", {"g"}}}, {{"W@GRAD", {"dw"}}}, attrs)},
          {{"w", RandomTensor<float>({10, 5}, -1, 1, 70)}, {"ids", ids}, {"g", RandomTensor<float>(out, -1, 1, 71)}},
          {"o", "dw"});
  }
}

TEST(CudaSparseKernelTest, SparseGradHasOneRowPerIdWithPaddingZeroed) {
  REQUIRE_GPU();
  for (int64_t pad : {int64_t{3}, int64_t{-2}}) {
    SCOPED_TRACE(pad);
    std::map<std::string, Attribute> attrs = {{"is_sparse", true}, {"padding_idx", pad}};
    Inputs in = {{"w", RandomTensor<float>({10, 5}, -1, 1, 72)},
                 {"ids", Ids({5, 1}, {4, pad, 7, 4, 0})},
                 {"g", RandomTensor<float>({5, 5}, -1, 1, 73)}};
    Scope cpu, gpu;
    ASSERT_TRUE(RunBoth({MakeOp("lookup_table_grad", {{"W", {"w"}}, {"Ids", {"ids"}}, {"Out@GRAD", {"g"}}},
                                {{"W@GRAD", {"dw"}}}, attrs)},
                        in, &cpu, &gpu)
                    .ok());
    const auto want = RowsOf(cpu, "dw"), got = RowsOf(gpu, "dw");
    EXPECT_EQ(got.first, (std::vector<int64_t>{4, pad, 7, 4, 0}));
    EXPECT_EQ(got.first, want.first);
    EXPECT_EQ(got.second, want.second);  // copies, no arithmetic; the padding row zeroed
    EXPECT_TRUE(gpu.FindVar("dw")->Get<SelectedRows>().value.place() == CUDAPlace(0));
  }
}

// Fed ids stay on the host (Ids is kReadAnywhere); ids an op made on the
// GPU are read back. Both look up, and make gradients, as on the CPU.
TEST(CudaSparseKernelTest, IdsOnTheHostOrMadeOnTheGpu) {
  REQUIRE_GPU();
  const std::map<std::string, Attribute> sparse = {{"is_sparse", true}};
  Scope cpu, gpu;
  absl::Status s =
      RunBoth({MakeOp("lookup_table", {{"W", {"w"}}, {"Ids", {"fed"}}}, {{"Out", {"o1"}}}),
               // scale moves its X to the GPU: a copy of the ids, so `fed` shows where lookup_table left it.
               MakeOp("scale", {{"X", {"fed_copy"}}}, {{"Out", {"made"}}}, {{"scale", 1.f}, {"bias", 1.f}}),
               MakeOp("lookup_table", {{"W", {"w"}}, {"Ids", {"made"}}}, {{"Out", {"o2"}}}),
               MakeOp("lookup_table_grad", {{"W", {"w"}}, {"Ids", {"made"}}, {"Out@GRAD", {"g"}}}, {{"W@GRAD", {"dw"}}},
                      sparse)},
              {{"w", RandomTensor<float>({10, 3}, -1, 1, 75)},
               {"fed", Ids({4, 1}, {0, 5, 2, 5})},
               {"fed_copy", Ids({4, 1}, {0, 5, 2, 5})},
               {"g", RandomTensor<float>({4, 3}, -1, 1, 76)}},
              &cpu, &gpu);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(GetTensor(gpu, "fed").place() == CPUPlace()) << "fed ids were moved to the GPU";
  EXPECT_TRUE(GetTensor(gpu, "made").place() == CUDAPlace(0));
  ExpectClose<float>(cpu, gpu, "o1", 0, 0);
  ExpectClose<float>(cpu, gpu, "o2", 0, 0);
  EXPECT_EQ(RowsOf(gpu, "dw"), RowsOf(cpu, "dw"));
}

TEST(CudaSparseKernelTest, AnIdOutsideTheTableIsNamed) {
  REQUIRE_GPU();
  Scope gpu;
  SetTensor(&gpu, "w", RandomTensor<float>({10, 5}, -1, 1, 74));
  SetTensor(&gpu, "ids", Ids({3, 1}, {1, 2, 12}));
  absl::Status s =
      RunOpsOn({MakeOp("lookup_table", {{"W", {"w"}}, {"Ids", {"ids"}}}, {{"Out", {"o"}}})}, &gpu, CUDAPlace(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("id 12 at position 2 is outside the table's 10 rows"), std::string::npos) << s;
}

// Every optimizer from the same sparse gradient (rows 1, 7, 1, 4 of a
// [10, 4] parameter) on both places.
TEST(CudaSparseKernelTest, OptimizersFromASparseGradientWithARepeatedRow) {
  REQUIRE_GPU();
  const DDim d{10, 4};
  Inputs dense = {{"p", RandomTensor<float>(d, -1, 1, 75)},  {"v", RandomTensor<float>(d, -1, 1, 76)},
                  {"m1", RandomTensor<float>(d, -1, 1, 77)}, {"m2", RandomTensor<float>(d, 0, 1, 78)},
                  {"lr", MakeTensor<float>({1}, {0.05f})},   {"b1p", MakeTensor<float>({1}, {0.81f})},
                  {"b2p", MakeTensor<float>({1}, {0.998f})}};
  SelectedRows grad;
  grad.height = 10;
  grad.rows = {1, 7, 1, 4};
  grad.value = RandomTensor<float>({4, 4}, -1, 1, 79);
  auto adam = [](bool lazy) {
    return MakeOp("adam",
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
                   {"Beta2PowOut", {"b2p"}}},
                  {{"lazy_mode", lazy}});
  };
  const std::vector<std::pair<OpDesc, std::vector<std::string>>> cases = {
      {MakeOp("sgd", {{"Param", {"p"}}, {"Grad", {"g"}}, {"LearningRate", {"lr"}}}, {{"ParamOut", {"p"}}}), {"p"}},
      // Out of place: ParamOut starts as a copy of Param, then its rows move.
      {MakeOp("sgd", {{"Param", {"p"}}, {"Grad", {"g"}}, {"LearningRate", {"lr"}}}, {{"ParamOut", {"po"}}}), {"po"}},
      {MakeOp("momentum", {{"Param", {"p"}}, {"Grad", {"g"}}, {"Velocity", {"v"}}, {"LearningRate", {"lr"}}},
              {{"ParamOut", {"p"}}, {"VelocityOut", {"v"}}}, {{"mu", 0.9f}}),
       {"p", "v"}},
      {adam(false), {"p", "m1", "m2", "b1p", "b2p"}},
      {adam(true), {"p", "m1", "m2", "b1p", "b2p"}},
      // Lazy and out of place: the outputs start as copies of the state.
      {MakeOp("adam",
              {{"Param", {"p"}},
               {"Grad", {"g"}},
               {"LearningRate", {"lr"}},
               {"Moment1", {"m1"}},
               {"Moment2", {"m2"}},
               {"Beta1Pow", {"b1p"}},
               {"Beta2Pow", {"b2p"}}},
              {{"ParamOut", {"po"}}, {"Moment1Out", {"m1o"}}, {"Moment2Out", {"m2o"}}}, {{"lazy_mode", true}}),
       {"po", "m1o", "m2o"}},
  };
  // Each case from the gradient above, and from one with no rows (a step
  // where the embedding saw no id: sgd and adam, lazy or not, move nothing,
  // adam's powers included, as Paddle's CPU kernel; momentum updates every
  // row with a zero gradient). With rows, adam's step reads the powers
  // already advanced (bound in place) and non-lazy adam's rows without
  // gradient step with ε unscaled, as on the CPU.
  SelectedRows none;
  none.height = grad.height;
  for (const SelectedRows* from : {&grad, &none}) {
    for (const auto& [op, outs] : cases) {
      SCOPED_TRACE(op.type + (op.attrs.count("lazy_mode") && std::get<bool>(op.attrs.at("lazy_mode")) ? " lazy" : "") +
                   (op.outputs.at("ParamOut")[0] == "p" ? "" : " out of place") +
                   (from->rows.empty() ? ", no rows" : ""));
      Scope cpu, gpu;
      *cpu.Var("g")->GetMutable<SelectedRows>() = *from;
      SelectedRows* g = gpu.Var("g")->GetMutable<SelectedRows>();
      g->height = from->height;
      g->rows = from->rows;
      if (!from->rows.empty()) g->value.CopyFrom(from->value);  // a host value: the executor moves it to the GPU
      absl::Status st = RunBoth({op}, dense, &cpu, &gpu);
      ASSERT_TRUE(st.ok()) << st;
      for (const auto& n : outs) ExpectClose<float>(cpu, gpu, n);
    }
  }
}

}  // namespace
}  // namespace oar::testing
