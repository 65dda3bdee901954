// Gradient kernels given an Out@GRAD, attribute or index that does not fit
// the forward shapes: each must be an InvalidArgument naming the op and the
// variable, never a read or write outside a buffer (or a division by zero).
// Each row crashed or silently succeeded before its fix.
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

Tensor F(DDim d) { return RandomTensor<float>(d, 0.1, 1, 1); }
Tensor D(DDim d) { return RandomTensor<double>(d, 0.1, 1, 2); }
template <typename T>
Tensor Fill(DDim d, T v) {
  Tensor t;
  T* p = t.mutable_data<T>(d);
  std::fill(p, p + t.numel(), v);
  return t;
}
Tensor WithLoD(Tensor t, LoD lod) {
  t.set_lod(lod);
  return t;
}

struct BadGradCase {
  std::string name;
  OpDesc op;
  std::map<std::string, Tensor> inputs;
  std::string expect;  // a substring of the error
};

class BadGradTest : public ::testing::TestWithParam<BadGradCase> {};

TEST_P(BadGradTest, IsAnInvalidArgumentNamingTheOp) {
  const BadGradCase& c = GetParam();
  Scope s;
  for (const auto& [name, t] : c.inputs) SetTensor(&s, name, t);
  absl::Status st = RunOps({c.op}, &s);
  ASSERT_FALSE(st.ok()) << c.name;
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find(c.op.type + ":"), std::string::npos) << st;
  EXPECT_NE(st.message().find(c.expect), std::string::npos) << c.name << ": " << st;
}

using VM = OpDesc::VarMap;
using Attrs = std::map<std::string, Attribute>;
OpDesc Op(const std::string& type, VM in, VM out, Attrs attrs = {}) { return MakeOp(type, in, out, attrs); }
const std::string kG = "Out@GRAD";
const VM kDX = {{"X@GRAD", {"dx"}}};
std::vector<int32_t> Ints(std::vector<int32_t> v) { return v; }

INSTANTIATE_TEST_SUITE_P(
    Grads, BadGradTest,
    ::testing::Values(
        BadGradCase{
            "concat_grad_out_grad_shape",
            Op("concat_grad", {{"X", {"a", "b"}}, {kG, {"g"}}}, {{"X@GRAD", {"da", "db"}}}, {{"axis", int32_t{1}}}),
            {{"a", F({2, 3})}, {"b", F({2, 4})}, {"g", F({2, 5})}},
            "input 'g' (Out@GRAD) has shape [2, 5], expected [2, 7]"},
        BadGradCase{"transpose2_grad_bad_axis",
                    Op("transpose2_grad", {{"XShape", {"xs"}}, {kG, {"g"}}}, kDX, {{"axis", Ints({0, 5})}}),
                    {{"xs", F({0, 2, 3})}, {"g", F({3, 2})}},
                    "axis [0, 5] is not a permutation"},
        BadGradCase{"transpose2_grad_out_grad_shape",
                    Op("transpose2_grad", {{"XShape", {"xs"}}, {kG, {"g"}}}, kDX, {{"axis", Ints({1, 0})}}),
                    {{"xs", F({0, 2, 3})}, {"g", F({2, 2})}},
                    "input 'g' (Out@GRAD) has shape [2, 2], expected [3, 2]"},
        BadGradCase{"softmax_with_cross_entropy_grad_label_range",
                    Op("softmax_with_cross_entropy_grad", {{"Label", {"l"}}, {"Softmax", {"s"}}, {"Loss@GRAD", {"g"}}},
                       {{"Logits@GRAD", {"dx"}}}),
                    {{"l", MakeTensor<int64_t>({2, 1}, {0, 7})}, {"s", F({2, 3})}, {"g", F({2, 1})}},
                    "label 7 in row 1 is outside [0, 3)"},
        BadGradCase{"softmax_with_cross_entropy_grad_loss_grad_shape",
                    Op("softmax_with_cross_entropy_grad", {{"Label", {"l"}}, {"Softmax", {"s"}}, {"Loss@GRAD", {"g"}}},
                       {{"Logits@GRAD", {"dx"}}}),
                    {{"l", MakeTensor<int64_t>({2, 1}, {0, 1})}, {"s", F({2, 3})}, {"g", F({1})}},
                    "input 'g' (Loss@GRAD) has shape [1], expected [2, 1]"},
        BadGradCase{"sequence_pool_grad_max_index_range",
                    Op("sequence_pool_grad", {{"X", {"x"}}, {"MaxIndex", {"mi"}}, {kG, {"g"}}}, kDX,
                       {{"pooltype", std::string("MAX")}}),
                    {{"x", WithLoD(F({4, 2}), {{0, 2, 4}})}, {"mi", Fill<int32_t>({2, 2}, 100)}, {"g", F({2, 2})}},
                    "MaxIndex 100"},
        BadGradCase{"sequence_pool_grad_out_grad_shape",
                    Op("sequence_pool_grad", {{"X", {"x"}}, {kG, {"g"}}}, kDX, {{"pooltype", std::string("SUM")}}),
                    {{"x", WithLoD(F({4, 2}), {{0, 2, 4}})}, {"g", F({1, 2})}},
                    "input 'g' (Out@GRAD) has shape [1, 2], expected [2, 2]"},
        BadGradCase{"reduce_sum_grad_dim_range",
                    Op("reduce_sum_grad", {{"X", {"x"}}, {kG, {"g"}}}, kDX, {{"dim", Ints({5})}}),
                    {{"x", F({2, 2})}, {"g", F({2})}},
                    "dim 5 out of range"},
        BadGradCase{"reduce_mean_grad_out_grad_shape",
                    Op("reduce_mean_grad", {{"X", {"x"}}, {kG, {"g"}}}, kDX, {{"dim", Ints({1})}}),
                    {{"x", F({2, 3})}, {"g", F({1})}},
                    "input 'g' (Out@GRAD) has shape [1], expected [2]"},
        BadGradCase{"conv2d_grad_zero_groups",
                    Op("conv2d_grad", {{"Input", {"x"}}, {"Filter", {"f"}}, {"Output@GRAD", {"g"}}},
                       {{"Input@GRAD", {"dx"}}, {"Filter@GRAD", {"df"}}}, {{"groups", int32_t{0}}}),
                    {{"x", F({1, 2, 4, 4})}, {"f", F({2, 2, 3, 3})}, {"g", F({1, 2, 2, 2})}},
                    "groups=0"},
        BadGradCase{"conv2d_grad_output_grad_shape",
                    Op("conv2d_grad", {{"Input", {"x"}}, {"Filter", {"f"}}, {"Output@GRAD", {"g"}}},
                       {{"Input@GRAD", {"dx"}}, {"Filter@GRAD", {"df"}}}),
                    {{"x", F({1, 2, 4, 4})}, {"f", F({2, 2, 3, 3})}, {"g", F({1, 2, 1, 1})}},
                    "input 'g' (Output@GRAD) has shape [1, 2, 1, 1], expected [1, 2, 2, 2]"},
        BadGradCase{"batch_norm_grad_scale_size",
                    Op("batch_norm_grad",
                       {{"X", {"x"}},
                        {"Scale", {"sc"}},
                        {"Bias", {"b"}},
                        {"SavedMean", {"sm"}},
                        {"SavedVariance", {"sv"}},
                        {"Y@GRAD", {"g"}}},
                       {{"X@GRAD", {"dx"}}, {"Scale@GRAD", {"dsc"}}, {"Bias@GRAD", {"db"}}}),
                    {{"x", F({2, 3})}, {"sc", F({2})}, {"b", F({2})}, {"sm", F({3})}, {"sv", F({3})}, {"g", F({2, 3})}},
                    "input 'sc' (Scale) has shape [2], expected [3]"},
        BadGradCase{"lookup_table_grad_float_ids",
                    Op("lookup_table_grad", {{"W", {"w"}}, {"Ids", {"ids"}}, {kG, {"g"}}}, {{"W@GRAD", {"dw"}}}),
                    {{"w", F({4, 2})}, {"ids", F({3, 1})}, {"g", F({3, 2})}},
                    "Ids must be int64"},
        BadGradCase{"lookup_table_grad_rank1_w",
                    Op("lookup_table_grad", {{"W", {"w"}}, {"Ids", {"ids"}}, {kG, {"g"}}}, {{"W@GRAD", {"dw"}}}),
                    {{"w", F({8})}, {"ids", Fill<int64_t>({3, 1}, 0)}, {"g", F({3, 2})}},
                    "must be 2-D"},
        BadGradCase{"lookup_table_grad_out_grad_shape",
                    Op("lookup_table_grad", {{"W", {"w"}}, {"Ids", {"ids"}}, {kG, {"g"}}}, {{"W@GRAD", {"dw"}}},
                       {{"is_sparse", true}}),
                    {{"w", F({4, 2})}, {"ids", Fill<int64_t>({3, 1}, 0)}, {"g", F({2, 2})}},
                    "input 'g' (Out@GRAD) has shape [2, 2], expected [3, 2]"},
        // The general case: Out@GRAD must have the shape (and dtype) of Out.
        BadGradCase{"elementwise_add_grad_out_grad_shape",
                    Op("elementwise_add_grad", {{"X", {"x"}}, {"Y", {"y"}}, {kG, {"g"}}},
                       {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}),
                    {{"x", F({2, 3})}, {"y", F({3})}, {"g", F({3})}},
                    "input 'g' (Out@GRAD) has shape [3], expected [2, 3]"},
        BadGradCase{"elementwise_mul_grad_out_grad_dtype",
                    Op("elementwise_mul_grad", {{"X", {"x"}}, {"Y", {"y"}}, {kG, {"g"}}},
                       {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}),
                    {{"x", D({2, 3})}, {"y", D({3})}, {"g", F({2, 3})}},
                    "input 'g' (Out@GRAD) has dtype float32, expected float64"},
        BadGradCase{"mul_grad_out_grad_shape",
                    Op("mul_grad", {{"X", {"x"}}, {"Y", {"y"}}, {kG, {"g"}}}, {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}),
                    {{"x", F({2, 3})}, {"y", F({3, 4})}, {"g", F({2, 2})}},
                    "input 'g' (Out@GRAD) has shape [2, 2], expected [2, 4]"},
        BadGradCase{
            "matmul_grad_out_grad_shape",
            Op("matmul_grad", {{"X", {"x"}}, {"Y", {"y"}}, {kG, {"g"}}}, {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}),
            {{"x", F({2, 3})}, {"y", F({3, 4})}, {"g", F({2})}},
            "input 'g' (Out@GRAD) has shape [2], expected [2, 4]"},
        BadGradCase{"relu_grad_out_grad_shape",
                    Op("relu_grad", {{"Out", {"o"}}, {kG, {"g"}}}, kDX),
                    {{"o", F({2, 3})}, {"g", F({3})}},
                    "input 'g' (Out@GRAD) has shape [3], expected [2, 3]"},
        BadGradCase{"square_grad_out_grad_shape",
                    Op("square_grad", {{"X", {"x"}}, {kG, {"g"}}}, kDX),
                    {{"x", F({2, 3})}, {"g", F({3})}},
                    "input 'g' (Out@GRAD) has shape [3], expected [2, 3]"},
        BadGradCase{"dropout_grad_mask_shape",
                    Op("dropout_grad", {{"Mask", {"m"}}, {kG, {"g"}}}, kDX),
                    {{"m", F({4})}, {"g", F({8})}},
                    "input 'm' (Mask) has shape [4], expected [8]"},
        BadGradCase{"pool2d_grad_out_grad_shape",
                    Op("pool2d_grad", {{"X", {"x"}}, {"Out", {"o"}}, {kG, {"g"}}}, kDX),
                    {{"x", F({1, 1, 4, 4})}, {"o", F({1, 1, 3, 3})}, {"g", F({1, 1, 2, 2})}},
                    "input 'g' (Out@GRAD) has shape [1, 1, 2, 2], expected [1, 1, 3, 3]"},
        BadGradCase{"clip_grad_out_grad_shape",
                    Op("clip_grad", {{"X", {"x"}}, {kG, {"g"}}}, kDX),
                    {{"x", F({4})}, {"g", F({2})}},
                    "input 'g' (Out@GRAD) has shape [2], expected [4]"},
        BadGradCase{"softmax_grad_out_grad_shape",
                    Op("softmax_grad", {{"Out", {"o"}}, {kG, {"g"}}}, kDX),
                    {{"o", F({2, 3})}, {"g", F({3})}},
                    "input 'g' (Out@GRAD) has shape [3], expected [2, 3]"},
        BadGradCase{"mean_grad_empty_out_grad",
                    Op("mean_grad", {{"X", {"x"}}, {kG, {"g"}}}, kDX),
                    {{"x", F({4})}, {"g", F({0})}},
                    "input 'g' (Out@GRAD) has shape [0], expected [1]"},
        BadGradCase{"cross_entropy_grad_y_grad_shape",
                    Op("cross_entropy_grad", {{"X", {"x"}}, {"Label", {"l"}}, {"Y@GRAD", {"g"}}}, kDX),
                    {{"x", F({2, 3})}, {"l", MakeTensor<int64_t>({2, 1}, {0, 1})}, {"g", F({1})}},
                    "input 'g' (Y@GRAD) has shape [1], expected [2, 1]"},
        BadGradCase{"reshape2_grad_out_grad_smaller_than_x",
                    Op("reshape2_grad", {{"XShape", {"xs"}}, {kG, {"g"}}}, kDX, {{"shape", Ints({6})}}),
                    {{"xs", F({0, 2, 3})}, {"g", F({3})}},
                    "input 'g' (Out@GRAD) has 3 elements, expected 6"},
        BadGradCase{"unsqueeze2_grad_out_grad_smaller_than_x",
                    Op("unsqueeze2_grad", {{"XShape", {"xs"}}, {kG, {"g"}}}, kDX, {{"axes", Ints({0})}}),
                    {{"xs", F({0, 4})}, {"g", F({1, 2})}},
                    "input 'g' (Out@GRAD) has 2 elements, expected 4"}),
    [](const ::testing::TestParamInfo<BadGradCase>& info) { return info.param.name; });

}  // namespace
}  // namespace oar::testing
