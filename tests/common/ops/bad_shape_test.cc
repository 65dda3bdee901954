// Forward kernels given shapes, ids or dtypes that do not fit: each must
// answer with an InvalidArgument naming the op and the variable, never
// write or read outside a buffer. One row per defect an audit found; each row
// crashed or silently succeeded before its fix.
#include "common/framework/selected_rows.h"
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

Tensor F(DDim d) { return RandomTensor<float>(d, 0.1, 1, 1); }
Tensor D(DDim d) { return RandomTensor<double>(d, 0.1, 1, 2); }
Tensor I64(DDim d, int64_t v = 0) {
  Tensor t;
  int64_t* p = t.mutable_data<int64_t>(d);
  std::fill(p, p + t.numel(), v);
  return t;
}
Tensor B(DDim d) {
  Tensor t;
  bool* p = t.mutable_data<bool>(d);
  std::fill(p, p + t.numel(), true);
  return t;
}
// Rows `rows` of a [height, width] table, every value 1.
SelectedRows Sparse(std::vector<int64_t> rows, int64_t height, int64_t width) {
  SelectedRows sr;
  sr.rows = std::move(rows);
  sr.height = height;
  sr.value = MakeTensor<float>({static_cast<int64_t>(sr.rows.size()), width},
                               std::vector<float>(sr.rows.size() * width, 1.0f));
  return sr;
}

struct BadShapeCase {
  std::string name;
  OpDesc op;
  std::map<std::string, Tensor> inputs;
  std::string expect;  // a substring of the error
  std::map<std::string, SelectedRows> sparse = {};
  std::vector<std::string> unwritten_sparse = {};  // SelectedRows with no rows yet
};

class BadShapeTest : public ::testing::TestWithParam<BadShapeCase> {};

TEST_P(BadShapeTest, IsAnInvalidArgumentNamingTheOp) {
  const BadShapeCase& c = GetParam();
  Scope s;
  for (const auto& [name, t] : c.inputs) SetTensor(&s, name, t);
  for (const auto& [name, sr] : c.sparse) *s.Var(name)->GetMutable<SelectedRows>() = sr;
  for (const auto& name : c.unwritten_sparse) s.Var(name)->GetMutable<SelectedRows>();
  absl::Status st = RunOps({c.op}, &s);
  ASSERT_FALSE(st.ok()) << c.name;
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find(c.op.type + ":"), std::string::npos) << st;
  EXPECT_NE(st.message().find(c.expect), std::string::npos) << c.name << ": " << st;
}

using VM = OpDesc::VarMap;
using Attrs = std::map<std::string, Attribute>;
OpDesc Op(const std::string& type, VM in, VM out, Attrs attrs = {}) { return MakeOp(type, in, out, attrs); }
const VM kXY = {{"X", {"x"}}, {"Y", {"y"}}};
const VM kOut = {{"Out", {"o"}}};
Attrs Sections(std::vector<int32_t> s) { return {{"sections", s}}; }

INSTANTIATE_TEST_SUITE_P(
    Kernels, BadShapeTest,
    ::testing::Values(
        // 1. split: sections must be >= 0 (one -1 for the rest) and fit X.
        BadShapeCase{"split_sections_exceed_x",
                     Op("split", {{"X", {"x"}}}, {{"Out", {"a", "b"}}}, Sections({5, -1})),
                     {{"x", F({4, 3})}},
                     "sections [5, -1] do not fit X ('x')[4, 3]"},
        BadShapeCase{"split_negative_section",
                     Op("split", {{"X", {"x"}}}, {{"Out", {"a", "b"}}}, Sections({7, -3})),
                     {{"x", F({4, 3})}},
                     "section 1 is -3"},
        BadShapeCase{"split_two_unknown_sections",
                     Op("split", {{"X", {"x"}}}, {{"Out", {"a", "b"}}}, Sections({-1, -1})),
                     {{"x", F({4, 3})}},
                     "more than one -1"},
        // 2. sum: every input checked (not only X[0]), sparse widths too.
        BadShapeCase{"sum_unwritten_sparse_first_then_wider_sparse",
                     Op("sum", {{"X", {"u", "d", "s"}}}, kOut),
                     {{"d", F({4, 3})}},
                     "input 's' (X[2]) has shape [4, 8], expected [4, 3]",
                     {{"s", Sparse({3}, 4, 8)}},
                     {"u"}},
        BadShapeCase{"sum_sparse_widths_differ",
                     Op("sum", {{"X", {"u", "a", "b"}}}, kOut),
                     {},
                     "input 'b' (X[2]) has shape [4, 3], expected [4, 8]",
                     {{"a", Sparse({0}, 4, 8)}, {"b", Sparse({1}, 4, 3)}},
                     {"u"}},
        BadShapeCase{"sum_mixed_dtypes",
                     Op("sum", {{"X", {"a", "b"}}}, kOut),
                     {{"a", D({4})}, {"b", F({4})}},
                     "input 'b' (X[1]) has dtype float32, expected float64"},
        // 3/4. mul and matmul: zero-size dimensions are compared too.
        BadShapeCase{"mul_zero_rows_in_y",
                     Op("mul", kXY, kOut),
                     {{"x", F({3, 5})}, {"y", F({0, 100})}},
                     "flattens to 5 columns but Y ('y')[0, 100] to 0 rows"},
        BadShapeCase{"matmul_zero_batch",
                     Op("matmul", kXY, kOut),
                     {{"x", F({0, 16, 16})}, {"y", F({3, 16, 16})}},
                     "batch dimensions differ"},
        BadShapeCase{"matmul_zero_inner",
                     Op("matmul", kXY, kOut),
                     {{"x", F({3, 0})}, {"y", F({5, 4})}},
                     "inner dimensions differ"},
        // 5. logical ops: Y is compared with X.
        BadShapeCase{"logical_and_short_y",
                     Op("logical_and", kXY, kOut),
                     {{"x", B({4})}, {"y", B({2})}},
                     "Y ('y')[2] must match X ('x')[4] or hold one value"},
        BadShapeCase{"logical_xor_short_y",
                     Op("logical_xor", kXY, kOut),
                     {{"x", B({4})}, {"y", B({3})}},
                     "Y ('y')[3] must match X ('x')[4] or hold one value"},
        // 6. losses over rank-0 tensors.
        BadShapeCase{"cross_entropy_rank0",
                     Op("cross_entropy", {{"X", {"x"}}, {"Label", {"l"}}}, {{"Y", {"o"}}}),
                     {{"x", F({})}, {"l", I64({})}},
                     "must have rank >= 1"},
        BadShapeCase{"softmax_with_cross_entropy_rank0",
                     Op("softmax_with_cross_entropy", {{"Logits", {"x"}}, {"Label", {"l"}}},
                        {{"Softmax", {"s"}}, {"Loss", {"o"}}}),
                     {{"x", F({})}, {"l", I64({})}},
                     "must have rank >= 1"},
        // 10. centered rmsprop writes MeanGradOut.
        BadShapeCase{"rmsprop_centered_without_mean_grad_out",
                     Op("rmsprop",
                        {{"Param", {"p"}},
                         {"MeanSquare", {"ms"}},
                         {"MeanGrad", {"mg"}},
                         {"LearningRate", {"lr"}},
                         {"Grad", {"g"}},
                         {"Moment", {"m"}}},
                        {{"ParamOut", {"p"}}, {"MomentOut", {"m"}}, {"MeanSquareOut", {"ms"}}}, {{"centered", true}}),
                     {{"p", F({3})}, {"ms", F({3})}, {"mg", F({3})}, {"lr", F({1})}, {"g", F({3})}, {"m", F({3})}},
                     "centered=true needs MeanGradOut"},
        // 14. every input in the kernel's dtype.
        BadShapeCase{"concat_mixed_dtypes",
                     Op("concat", {{"X", {"a", "b"}}}, kOut),
                     {{"a", I64({2, 3})}, {"b", F({2, 3})}},
                     "input 'a' (X[0]) has dtype int64, expected float32"},
        BadShapeCase{"elementwise_add_mixed_dtypes",
                     Op("elementwise_add", kXY, kOut),
                     {{"x", D({4})}, {"y", F({4})}},
                     "input 'y' (Y) has dtype float32, expected float64"},
        BadShapeCase{"mul_mixed_dtypes",
                     Op("mul", kXY, kOut),
                     {{"x", D({2, 3})}, {"y", F({3, 2})}},
                     "input 'y' (Y) has dtype float32, expected float64"},
        BadShapeCase{"matmul_mixed_dtypes",
                     Op("matmul", kXY, kOut),
                     {{"x", D({2, 3})}, {"y", F({3, 2})}},
                     "input 'y' (Y) has dtype float32, expected float64"},
        BadShapeCase{
            "batch_norm_scale_dtype",
            Op("batch_norm", {{"X", {"x"}}, {"Scale", {"sc"}}, {"Bias", {"b"}}, {"Mean", {"m"}}, {"Variance", {"v"}}},
               {{"Y", {"y"}},
                {"MeanOut", {"m"}},
                {"VarianceOut", {"v"}},
                {"SavedMean", {"sm"}},
                {"SavedVariance", {"sv"}}}),
            {{"x", D({2, 3})}, {"sc", F({3})}, {"b", D({3})}, {"m", D({3})}, {"v", D({3})}},
            "input 'sc' (Scale) has dtype float32, expected float64"},
        BadShapeCase{"conv2d_filter_dtype",
                     Op("conv2d", {{"Input", {"x"}}, {"Filter", {"f"}}}, {{"Output", {"o"}}}),
                     {{"x", D({1, 1, 3, 3})}, {"f", F({1, 1, 2, 2})}},
                     "input 'f' (Filter) has dtype float32, expected float64"}),
    [](const ::testing::TestParamInfo<BadShapeCase>& info) { return info.param.name; });

// The regression behind the sum row above: an unwritten sparse X[0] made sum
// skip every check and allocate Out with a negative size.
TEST(SumOpTest, UnwrittenSparseFirstInputAddsNothing) {
  Scope s;
  s.Var("u")->GetMutable<SelectedRows>();  // never written
  SetTensor(&s, "d", MakeTensor<float>({2, 2}, {1, 2, 3, 4}));
  absl::Status st = RunOps({MakeOp("sum", {{"X", {"u", "d"}}}, {{"Out", {"o"}}})}, &s);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(GetTensor(s, "o").dims(), (DDim{2, 2}));
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "o")), (std::vector<float>{1, 2, 3, 4}));
}

TEST(SumOpTest, SparseSumTakesItsHeightFromAWrittenInput) {
  Scope s;
  SelectedRows u;
  u.height = 2;  // no rows yet: its height says nothing
  *s.Var("u")->GetMutable<SelectedRows>() = u;
  *s.Var("a")->GetMutable<SelectedRows>() = Sparse({5}, 6, 3);
  absl::Status st = RunOps({MakeOp("sum", {{"X", {"u", "a"}}}, {{"Out", {"o"}}})}, &s);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(s.FindVar("o")->Get<SelectedRows>().height, 6);
}

// A step in which two tied embeddings saw no id: the sum of their empty
// sparse gradients, or a merge of one, is empty with the rows' shape, and
// the update after it runs (moving nothing) instead of refusing a [0, 0]
// gradient for a [6, 3] parameter.
TEST(SumOpTest, AnEmptySparseSumOrMergeFeedsTheUpdateAfterIt) {
  for (const bool merge : {false, true}) {
    SCOPED_TRACE(merge ? "merge_selected_rows" : "sum");
    Scope s;
    for (const char* name : {"a", "b"}) {
      SelectedRows* e = s.Var(name)->GetMutable<SelectedRows>();
      e->height = 6;
      e->value.mutable_data<float>(DDim{0, 3});  // lookup_table_grad's output for no ids
    }
    SetTensor(&s, "w", MakeTensor<float>({6, 3}, std::vector<float>(18, 1.0f)));
    SetTensor(&s, "lr", MakeTensor<float>({1}, {0.5f}));
    std::vector<OpDesc> ops = {MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"g"}}})};
    if (merge) ops.push_back(MakeOp("merge_selected_rows", {{"X", {"g"}}}, {{"Out", {"g"}}}));
    ops.push_back(MakeOp("sgd", {{"Param", {"w"}}, {"Grad", {"g"}}, {"LearningRate", {"lr"}}}, {{"ParamOut", {"w"}}}));
    absl::Status st = RunOps(ops, &s);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(s.FindVar("g")->Get<SelectedRows>().value.dims(), (DDim{0, 3}));
    EXPECT_EQ(TensorToVector<float>(GetTensor(s, "w")), std::vector<float>(18, 1.0f));
  }
}

// CBLAS refuses a leading dimension of 0 and left Out as it was.
TEST(MatmulOpTest, EmptyInnerDimensionGivesZeros) {
  for (const char* type : {"matmul", "mul"}) {
    Scope s;
    SetTensor(&s, "x", MakeTensor<float>({3, 0}, {}));
    SetTensor(&s, "y", MakeTensor<float>({0, 4}, {}));
    SetTensor(&s, "o", MakeTensor<float>({3, 4}, std::vector<float>(12, 7.0f)));  // stale values
    absl::Status st = RunOps({MakeOp(type, {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}})}, &s);
    ASSERT_TRUE(st.ok()) << type << ": " << st;
    EXPECT_EQ(TensorToVector<float>(GetTensor(s, "o")), std::vector<float>(12, 0.0f)) << type;
  }
}

// scale and reduce read X before asking for Out's buffer: in place on a
// buffer another tensor shares, Out gets a fresh buffer and X must still be
// read from the old one.
TEST(ScaleOpTest, InPlaceOnASharedBufferReadsTheInput) {
  Scope s;
  const int64_t n = 1 << 20;  // above the mmap threshold: a fresh buffer reads as zeros
  Tensor x = MakeTensor<float>({n}, std::vector<float>(n, 3.0f));
  SetTensor(&s, "x", x);  // `x` here keeps sharing the buffer
  absl::Status st = RunOps({MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"x"}}}, {{"scale", 2.0f}})}, &s);
  ASSERT_TRUE(st.ok()) << st;
  const Tensor& out = GetTensor(s, "x");
  EXPECT_EQ(out.data<float>()[0], 6.0f);
  EXPECT_EQ(out.data<float>()[n - 1], 6.0f);
  EXPECT_EQ(x.data<float>()[0], 3.0f);  // the other owner's values are untouched
}

TEST(ReduceOpTest, InPlaceReduceOverUnitDimsKeepsTheValues) {
  Scope s;
  SetTensor(&s, "x", MakeTensor<float>({3, 1}, {1, 2, 3}));
  absl::Status st = RunOps(
      {MakeOp("reduce_sum", {{"X", {"x"}}}, {{"Out", {"x"}}}, {{"dim", std::vector<int32_t>{1}}, {"keep_dim", true}})},
      &s);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(TensorToVector<float>(GetTensor(s, "x")), (std::vector<float>{1, 2, 3}));
}

}  // namespace
}  // namespace oar::testing
