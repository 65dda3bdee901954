// The fp32 kernels of every differentiable op against central differences
// (relative error <= 1e-3); the fp64 kernels are checked more tightly in each
// op's own test.
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

struct Fp32Case {
  std::string name;
  OpDesc op;
  std::map<std::string, Tensor> inputs;
  std::vector<std::string> check;
  std::vector<std::string> loss_outputs;
};

Tensor R(DDim d, double lo = -1, double hi = 1, uint64_t seed = 1) { return RandomTensor<float>(d, lo, hi, seed); }
Tensor Ids(std::vector<int64_t> v) { return MakeTensor<int64_t>({static_cast<int64_t>(v.size()), 1}, v); }
Tensor Seq() {
  Tensor t = R({5, 2}, -1, 1, 3);
  t.set_lod({{0, 2, 5}});
  return t;
}

class Fp32GradTest : public ::testing::TestWithParam<Fp32Case> {};

TEST_P(Fp32GradTest, MatchesCentralDifferences) {
  const Fp32Case& c = GetParam();
  ExpectGradientsMatch<float>(c.op, c.inputs, c.check,
                              {.eps = 5e-3, .tolerance = 1e-3, .loss_outputs = c.loss_outputs});
}

INSTANTIATE_TEST_SUITE_P(
    Ops, Fp32GradTest,
    ::testing::Values(
        Fp32Case{"softmax", MakeOp("softmax", {{"X", {"x"}}}, {{"Out", {"o"}}}), {{"x", R({3, 4})}}, {"x"}, {}},
        Fp32Case{"cross_entropy",
                 MakeOp("cross_entropy", {{"X", {"x"}}, {"Label", {"l"}}}, {{"Y", {"o"}}}),
                 {{"x", R({3, 4}, 0.2, 1)}, {"l", Ids({1, 3, 0})}},
                 {"x"},
                 {}},
        Fp32Case{"softmax_with_cross_entropy",
                 MakeOp("softmax_with_cross_entropy", {{"Logits", {"x"}}, {"Label", {"l"}}},
                        {{"Softmax", {"s"}}, {"Loss", {"o"}}}),
                 {{"x", R({3, 4})}, {"l", Ids({1, 3, 0})}},
                 {"x"},
                 {"o"}},
        Fp32Case{"mean", MakeOp("mean", {{"X", {"x"}}}, {{"Out", {"o"}}}), {{"x", R({3, 4})}}, {"x"}, {}},
        Fp32Case{"sum",
                 MakeOp("sum", {{"X", {"a", "b"}}}, {{"Out", {"o"}}}),
                 {{"a", R({4})}, {"b", R({4}, -1, 1, 2)}},
                 {"a", "b"},
                 {}},
        Fp32Case{"scale",
                 MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"scale", 2.5f}, {"bias", 1.0f}}),
                 {{"x", R({4})}},
                 {"x"},
                 {}},
        Fp32Case{"matmul",
                 MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}, {{"transpose_Y", true}}),
                 {{"x", R({2, 3})}, {"y", R({4, 3}, -1, 1, 2)}},
                 {"x", "y"},
                 {}},
        Fp32Case{"pool2d_avg",
                 MakeOp("pool2d", {{"X", {"x"}}}, {{"Out", {"o"}}},
                        {{"pooling_type", std::string("avg")},
                         {"ksize", std::vector<int32_t>{2, 2}},
                         {"strides", std::vector<int32_t>{2, 2}}}),
                 {{"x", R({1, 2, 4, 4})}},
                 {"x"},
                 {}},
        Fp32Case{"pool2d_max",
                 MakeOp("pool2d", {{"X", {"x"}}}, {{"Out", {"o"}}},
                        {{"ksize", std::vector<int32_t>{2, 2}}, {"strides", std::vector<int32_t>{2, 2}}}),
                 {{"x", R({1, 2, 4, 4})}},
                 {"x"},
                 {}},
        Fp32Case{"batch_norm",
                 MakeOp("batch_norm",
                        {{"X", {"x"}}, {"Scale", {"s"}}, {"Bias", {"b"}}, {"Mean", {"m"}}, {"Variance", {"v"}}},
                        {{"Y", {"y"}},
                         {"MeanOut", {"m"}},
                         {"VarianceOut", {"v"}},
                         {"SavedMean", {"sm"}},
                         {"SavedVariance", {"sv"}}}),
                 {{"x", R({4, 2, 2, 2}, -2, 2)},
                  {"s", R({2}, 0.5, 1.5, 2)},
                  {"b", R({2}, -1, 1, 3)},
                  {"m", MakeTensor<float>({2}, {0, 0})},
                  {"v", MakeTensor<float>({2}, {1, 1})}},
                 {"x", "s", "b"},
                 {"y"}},
        Fp32Case{"dropout",
                 MakeOp("dropout", {{"X", {"x"}}}, {{"Out", {"o"}}, {"Mask", {"m"}}},
                        {{"fix_seed", true}, {"seed", int32_t{3}}}),
                 {{"x", R({3, 4})}},
                 {"x"},
                 {"o"}},
        Fp32Case{"transpose2",
                 MakeOp("transpose2", {{"X", {"x"}}}, {{"Out", {"o"}}, {"XShape", {"xs"}}},
                        {{"axis", std::vector<int32_t>{1, 0}}}),
                 {{"x", R({2, 3})}},
                 {"x"},
                 {"o"}},
        Fp32Case{"concat",
                 MakeOp("concat", {{"X", {"a", "b"}}}, {{"Out", {"o"}}}, {{"axis", int32_t{1}}}),
                 {{"a", R({2, 1})}, {"b", R({2, 3}, -1, 1, 2)}},
                 {"a", "b"},
                 {}},
        Fp32Case{"lookup_table",
                 MakeOp("lookup_table", {{"W", {"w"}}, {"Ids", {"i"}}}, {{"Out", {"o"}}}),
                 {{"w", R({5, 3})}, {"i", Ids({4, 1, 4})}},
                 {"w"},
                 {}},
        Fp32Case{"sequence_pool",
                 MakeOp("sequence_pool", {{"X", {"x"}}}, {{"Out", {"o"}}, {"MaxIndex", {"mi"}}},
                        {{"pooltype", std::string("SQRT")}}),
                 {{"x", Seq()}},
                 {"x"},
                 {"o"}},
        Fp32Case{"reduce_mean",
                 MakeOp("reduce_mean", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"dim", std::vector<int32_t>{1}}}),
                 {{"x", R({3, 4})}},
                 {"x"},
                 {}},
        Fp32Case{"clip",
                 MakeOp("clip", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"min", -2.0f}, {"max", 2.0f}}),
                 {{"x", R({4})}},
                 {"x"},
                 {}},
        Fp32Case{"exp", MakeOp("exp", {{"X", {"x"}}}, {{"Out", {"o"}}}), {{"x", R({4})}}, {"x"}, {}},
        Fp32Case{"elementwise_min",
                 MakeOp("elementwise_min", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}),
                 {{"x", R({4})}, {"y", R({4}, -1, 1, 2)}},
                 {"x", "y"},
                 {}},
        Fp32Case{"conv2d_grouped",
                 MakeOp("conv2d", {{"Input", {"x"}}, {"Filter", {"w"}}}, {{"Output", {"o"}}},
                        {{"groups", int32_t{2}}, {"paddings", std::vector<int32_t>{1, 1}}}),
                 {{"x", R({1, 2, 4, 4})}, {"w", R({2, 1, 3, 3}, -1, 1, 2)}},
                 {"x", "w"},
                 {}}),
    [](const ::testing::TestParamInfo<Fp32Case>& i) { return i.param.name; });

}  // namespace
}  // namespace oar::testing
