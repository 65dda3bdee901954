// Every op answers bad input with an InvalidArgument/FailedPrecondition that
// names the op — never a crash. One row per op not covered in its own test.
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

struct BadCase {
  std::string name;
  OpDesc op;
  std::map<std::string, Tensor> inputs;
  std::string expect;  // a substring of the error
};

class BadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInputTest, IsAClearError) {
  const BadCase& c = GetParam();
  Scope s;
  for (const auto& [name, t] : c.inputs) SetTensor(&s, name, t);
  absl::Status st = RunOps({c.op}, &s);
  ASSERT_FALSE(st.ok()) << c.name;
  EXPECT_NE(st.message().find(c.expect), std::string::npos) << c.name << ": " << st;
}

Tensor F(DDim d) { return RandomTensor<float>(d, 0.1, 1, 1); }
Tensor I64(DDim d) {
  Tensor t;
  int64_t* p = t.mutable_data<int64_t>(d);
  std::fill(p, p + t.numel(), 0);
  return t;
}
template <typename T>
Tensor Of(DDim d, std::vector<T> v) {
  Tensor t;
  std::copy(v.begin(), v.end(), t.mutable_data<T>(d));
  return t;
}

INSTANTIATE_TEST_SUITE_P(
    Ops, BadInputTest,
    ::testing::Values(
        BadCase{"mean_missing_input",
                MakeOp("mean", {{"X", {"x"}}}, {{"Out", {"o"}}}),
                {},
                "mean: input X ('x') has no value"},
        BadCase{"sigmoid_missing_output_slot",
                MakeOp("sigmoid", {{"X", {"x"}}}, {}),
                {{"x", F({2})}},
                "missing required output slot 'Out'"},
        BadCase{"tanh_two_inputs",
                MakeOp("tanh", {{"X", {"x", "y"}}}, {{"Out", {"o"}}}),
                {{"x", F({2})}, {"y", F({2})}},
                "takes one variable"},
        BadCase{"uniform_min_above_max",
                MakeOp("uniform_random", {}, {{"Out", {"o"}}},
                       {{"shape", std::vector<int64_t>{2}}, {"min", 1.0f}, {"max", -1.0f}}),
                {},
                "min 1 > max -1"},
        BadCase{"uniform_negative_shape",
                MakeOp("uniform_random", {}, {{"Out", {"o"}}}, {{"shape", std::vector<int64_t>{-1, 2}}}),
                {},
                "negative dimension"},
        BadCase{"gaussian_negative_std",
                MakeOp("gaussian_random", {}, {{"Out", {"o"}}}, {{"shape", std::vector<int64_t>{2}}, {"std", -1.0f}}),
                {},
                "std -1"},
        BadCase{"fill_constant_shape_tensor",
                MakeOp("fill_constant", {{"ShapeTensor", {"s"}}}, {{"Out", {"o"}}}),
                {{"s", MakeTensor<int64_t>({2}, {3, -2})}},
                "has a negative dimension"},
        BadCase{"scale_wrong_attr",
                MakeOp("scale", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"scale", std::string("big")}}),
                {{"x", F({2})}},
                "attribute 'scale' should be FLOAT"},
        BadCase{"matmul_rank0",
                MakeOp("matmul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}),
                {{"x", F({})}, {"y", F({3})}},
                "at least 1-D"},
        BadCase{"accuracy_label_shape",
                MakeOp("accuracy", {{"Out", {"v"}}, {"Indices", {"i"}}, {"Label", {"l"}}}, {{"Accuracy", {"a"}}}),
                {{"v", F({2, 1})}, {"i", I64({2, 1})}, {"l", I64({3, 1})}},
                "different batch sizes"},
        BadCase{"momentum_velocity_shape",
                MakeOp("momentum", {{"Param", {"p"}}, {"Grad", {"g"}}, {"Velocity", {"v"}}, {"LearningRate", {"lr"}}},
                       {{"ParamOut", {"p"}}, {"VelocityOut", {"v"}}}),
                {{"p", F({3})}, {"g", F({3})}, {"v", F({4})}, {"lr", F({1})}},
                "Velocity ('v')[4] does not match Param ('p')[3]"},
        BadCase{"adam_beta_pow_shape",
                MakeOp("adam",
                       {{"Param", {"p"}},
                        {"Grad", {"g"}},
                        {"LearningRate", {"lr"}},
                        {"Moment1", {"m"}},
                        {"Moment2", {"m"}},
                        {"Beta1Pow", {"b"}},
                        {"Beta2Pow", {"b"}}},
                       {{"ParamOut", {"p"}}, {"Moment1Out", {"m"}}, {"Moment2Out", {"m"}}}),
                {{"p", F({3})}, {"g", F({3})}, {"lr", F({1})}, {"m", F({3})}, {"b", F({2})}},
                "Beta1Pow must hold one value"},
        BadCase{"sgd_lr_shape",
                MakeOp("sgd", {{"Param", {"p"}}, {"Grad", {"g"}}, {"LearningRate", {"lr"}}}, {{"ParamOut", {"p"}}}),
                {{"p", F({3})}, {"g", F({3})}, {"lr", F({2})}},
                "LearningRate must hold one value"},
        BadCase{"sgd_int_grad",
                MakeOp("sgd", {{"Param", {"p"}}, {"Grad", {"g"}}, {"LearningRate", {"lr"}}}, {{"ParamOut", {"p"}}}),
                {{"p", F({3})}, {"g", I64({3})}, {"lr", F({1})}},
                "input Grad has dtype int64"},
        BadCase{"feed_without_list",
                MakeOp("feed", {{"X", {"feed"}}}, {{"Out", {"x"}}}, {{"col", int32_t{0}}}),
                {{"feed", F({1})}},
                "no value was fed for 'x'"},
        BadCase{"fetch_empty_var",
                MakeOp("fetch", {{"X", {"x"}}}, {{"Out", {"fetch"}}}),
                {},
                "fetch: input X ('x') has no value"},
        BadCase{"swce_soft_label_shape",
                MakeOp("softmax_with_cross_entropy", {{"Logits", {"x"}}, {"Label", {"l"}}},
                       {{"Softmax", {"s"}}, {"Loss", {"o"}}}, {{"soft_label", true}}),
                {{"x", F({2, 3})}, {"l", F({2, 4})}},
                "soft Label[2, 4] must match Logits[2, 3]"},
        BadCase{"reduce_dim_out_of_range",
                MakeOp("reduce_sum", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"dim", std::vector<int32_t>{3}}}),
                {{"x", F({2, 2})}},
                "dim 3 out of range"},
        BadCase{"clip_min_above_max",
                MakeOp("clip", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"min", 2.0f}, {"max", 1.0f}}),
                {{"x", F({2})}},
                "min 2 > max 1"},
        BadCase{"clip_by_norm_zero",
                MakeOp("clip_by_norm", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"max_norm", 0.0f}}),
                {{"x", F({2})}},
                "max_norm must be positive"},
        BadCase{"cast_to_fp16",
                MakeOp("cast", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"out_dtype", int32_t{4}}}),
                {{"x", F({2})}},
                "out_dtype 4 is not supported"},
        BadCase{"increment_vector",
                MakeOp("increment", {{"X", {"x"}}}, {{"Out", {"x"}}}),
                {{"x", F({2})}},
                "X must hold one value"},
        BadCase{"less_than_shapes",
                MakeOp("less_than", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}),
                {{"x", F({3})}, {"y", F({2})}},
                "must match X"},
        BadCase{"logical_and_float",
                MakeOp("logical_and", {{"X", {"x"}}, {"Y", {"x"}}}, {{"Out", {"o"}}}),
                {{"x", F({2})}},
                "no kernel for float32"},
        BadCase{"conditional_block_vector_cond",
                MakeOp("conditional_block", {{"Cond", {"c"}}}, {}, {{"is_scalar_condition", true}}),
                {{"c", F({2})}},
                "a scalar Cond ('c' (Cond)) must be one bool"},
        BadCase{"write_to_array_negative_index",
                MakeOp("write_to_array", {{"X", {"x"}}, {"I", {"i"}}}, {{"Out", {"a"}}}),
                {{"x", F({2})}, {"i", Of<int64_t>({1}, {-1})}},
                "an array position cannot be negative"},
        BadCase{"read_from_array_past_end",
                MakeOp("read_from_array", {{"X", {"a"}}, {"I", {"i"}}}, {{"Out", {"o"}}}),
                {{"a", F({2})}, {"i", Of<int64_t>({1}, {2})}},
                "has no element 2"},
        BadCase{"while_grad_before_while",
                MakeOp("while_grad", {{"StepScopes", {"steps"}}}, {}),
                {},
                "while_grad: input StepScopes ('steps') has no value"},
        BadCase{"select_input_mask_out_of_range",
                MakeOp("select_input", {{"X", {"x"}}, {"Mask", {"m"}}}, {{"Out", {"o"}}}),
                {{"x", F({2})}, {"m", Of<int32_t>({1}, {3})}},
                "Mask is 3, not in [0, 1)"},
        BadCase{
            "warpctc_label_not_a_class",
            MakeOp("warpctc", {{"Logits", {"x"}}, {"Label", {"l"}}, {"LogitsLength", {"xl"}}, {"LabelLength", {"ll"}}},
                   {{"Loss", {"o"}}}),
            {{"x", F({3, 1, 4})},
             {"l", Of<int32_t>({1, 2}, {5, 1})},
             {"xl", Of<int64_t>({1}, {3})},
             {"ll", Of<int64_t>({1}, {2})}},
            "label 5 of sequence 0 is not a class in [0, 4)"},
        BadCase{"hash_mod_by_zero",
                MakeOp("hash", {{"X", {"x"}}}, {{"Out", {"o"}}}, {{"mod_by", int64_t{0}}}),
                {{"x", I64({2, 1})}},
                "mod_by (0)"},
        BadCase{
            "edit_distance_empty_reference",
            MakeOp("edit_distance", {{"Hyps", {"h"}}, {"Refs", {"r"}}, {"HypsLength", {"hl"}}, {"RefsLength", {"rl"}}},
                   {{"Out", {"o"}}, {"SequenceNum", {"n"}}}, {{"normalized", true}}),
            {{"h", I64({1, 3})}, {"r", I64({1, 3})}, {"hl", Of<int64_t>({1}, {2})}, {"rl", Of<int64_t>({1}, {0})}},
            "reference 0 is empty"},
        BadCase{"assign_missing",
                MakeOp("assign", {{"X", {"x"}}}, {{"Out", {"o"}}}),
                {},
                "assign: input X ('x') has no value"},
        BadCase{"save_empty_path", MakeOp("save", {{"X", {"x"}}}, {}), {{"x", F({2})}}, "file_path is empty"},
        BadCase{"load_missing_file",
                MakeOp("load", {}, {{"Out", {"o"}}}, {{"file_path", std::string("/nonexistent/oar/w")}}),
                {},
                "cannot open /nonexistent/oar/w"},
        BadCase{"elementwise_pow_broadcast",
                MakeOp("elementwise_pow", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}),
                {{"x", F({2, 3})}, {"y", F({2})}},
                "does not match"},
        BadCase{"mul_int_input",
                MakeOp("mul", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}),
                {{"x", I64({2, 2})}, {"y", I64({2, 2})}},
                "no kernel for int64"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

}  // namespace
}  // namespace oar::testing
