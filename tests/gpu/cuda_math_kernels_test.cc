// The GPU kernels of the unary math ops (exp, sqrt, square, cos, abs,
// floor, ceil, sign and the activations, with their gradients),
// elementwise_max/min with their gradients (ties included),
// fused_elemwise_activation with its gradient, the comparisons, the
// logical ops and assign, against their CPU kernels on the
// same inputs. Needs a GPU: each test skips itself, with the reason, on a
// host without one. Labelled `gpu`. Tolerance: gpu_test_util.h's (one
// libm call per element: a few ulps apart at most).
#include <string>
#include <vector>

#include "tests/gpu/gpu_test_util.h"

namespace oar::testing {
namespace {

// Outputs compared exactly (bool, int64).
template <typename T>
void ExpectSame(const Scope& cpu, const Scope& gpu, const std::string& name) {
  ExpectClose<T>(cpu, gpu, name, 0, 0);
}

TEST(CudaMathKernelTest, UnaryMathAndActivationsWithTheirGradients) {
  REQUIRE_GPU();
  struct Case {
    std::string type;
    bool grad_from_x;
    double lo, hi;
  };
  const std::vector<Case> cases = {{"relu", false, -3, 3}, {"sigmoid", false, -3, 3}, {"tanh", false, -3, 3},
                                   {"exp", false, -3, 3},  {"sqrt", false, 0.1, 4},   {"square", true, -3, 3},
                                   {"cos", true, -3, 3},   {"abs", true, -3, 3},      {"floor", true, -3, 3},
                                   {"ceil", true, -3, 3},  {"sign", true, -3, 3}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.type);
    const std::string src = c.grad_from_x ? "X" : "Out";
    Check({MakeOp(c.type, {{"X", {"x"}}}, {{"Out", {"o"}}}),
           MakeOp(c.type + "_grad", {{src, {c.grad_from_x ? "x" : "o"}}, {"Out@GRAD", {"g"}}}, {{"X@GRAD", {"dx"}}})},
          {{"x", RandomTensor<float>({13, 17}, c.lo, c.hi, 40)}, {"g", RandomTensor<float>({13, 17}, -1, 1, 41)}},
          {"o", "dx"});
  }
}

TEST(CudaMathKernelTest, ElementwiseMaxMinOverBroadcastLayoutsAndTies) {
  REQUIRE_GPU();
  struct Layout {
    DDim x, y;
    int axis;
  };
  const std::vector<Layout> layouts = {
      {{6, 5}, {6, 5}, -1}, {{7, 3}, {3}, 1}, {{2, 3, 4}, {3, 1}, 1}, {{5, 1, 3}, {5}, 0}};
  for (const std::string type : {"elementwise_max", "elementwise_min"}) {
    for (const Layout& l : layouts) {
      SCOPED_TRACE(type + " X" + l.x.ToString() + " Y" + l.y.ToString());
      const std::map<std::string, Attribute> axis = {{"axis", int32_t{l.axis}}};
      Check({MakeOp(type, {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}, axis),
             MakeOp(type + "_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"g"}}},
                    {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}}, axis)},
            {{"x", RandomTensor<float>(l.x, -1, 1, 42)},
             {"y", RandomTensor<float>(l.y, -1, 1, 43)},
             {"g", RandomTensor<float>(l.x, -1, 1, 44)}},
            {"o", "dx", "dy"});
    }
    // Ties: the gradient goes to Y on both devices.
    Check({MakeOp(type, {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}}),
           MakeOp(type + "_grad", {{"X", {"x"}}, {"Y", {"y"}}, {"Out@GRAD", {"g"}}},
                  {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}})},
          {{"x", MakeTensor<float>({4}, {1, 2, 3, -1})},
           {"y", MakeTensor<float>({4}, {1, 0, 3, 2})},
           {"g", MakeTensor<float>({4}, {0.5f, 0.25f, 2, 4})}},
          {"o", "dx", "dy"});
  }
}

// fused_elemwise_activation (what --fuse_elewise_add_act_ops makes) and its
// gradient, each activation, Y the same shape as X or broadcast; the grad
// with every output, or with Y's alone.
TEST(CudaMathKernelTest, FusedElemwiseActivationAndItsGradient) {
  REQUIRE_GPU();
  struct Layout {
    DDim x, y;
    int axis;
  };
  // Same shapes; Y over the last axis; Y over a middle axis (a conv bias:
  // post > 1); Y over the first axis (pre 1).
  const std::vector<Layout> layouts = {{{4, 6}, {4, 6}, -1}, {{4, 6}, {6}, -1}, {{2, 3, 4}, {3}, 1}, {{3, 4}, {3}, 0}};
  for (const std::string act : {"relu", "sigmoid", "tanh"}) {
    for (const Layout& l : layouts) {
      SCOPED_TRACE(act + " X" + l.x.ToString() + " Y" + l.y.ToString());
      const std::map<std::string, Attribute> fwd = {{"functor_list", std::vector<std::string>{act, "elementwise_add"}},
                                                    {"axis", int32_t{l.axis}}};
      const std::map<std::string, Attribute> bwd = {
          {"functor_list", std::vector<std::string>{act + "_grad", "elementwise_add_grad"}}, {"axis", int32_t{l.axis}}};
      Check({MakeOp("fused_elemwise_activation", {{"X", {"x"}}, {"Y", {"y"}}},
                    {{"Out", {"o"}}, {"IntermediateOut", {"i"}}}, fwd),
             MakeOp("fused_elemwise_activation_grad",
                    {{"X", {"x"}}, {"Y", {"y"}}, {"Out", {"o"}}, {"IntermediateOut", {"i"}}, {"Out@GRAD", {"g"}}},
                    {{"X@GRAD", {"dx"}}, {"Y@GRAD", {"dy"}}, {"IntermediateOut@GRAD", {"di"}}}, bwd),
             MakeOp("fused_elemwise_activation_grad", {{"Y", {"y"}}, {"Out", {"o"}}, {"Out@GRAD", {"g"}}},
                    {{"Y@GRAD", {"dy_only"}}}, bwd),
             // What the pass binds: no X@GRAD when X needs none.
             MakeOp("fused_elemwise_activation_grad", {{"Y", {"y"}}, {"Out", {"o"}}, {"Out@GRAD", {"g"}}},
                    {{"IntermediateOut@GRAD", {"di2"}}, {"Y@GRAD", {"dy2"}}}, bwd)},
            {{"x", RandomTensor<float>(l.x, -2, 2, 48)},
             {"y", RandomTensor<float>(l.y, -2, 2, 49)},
             {"g", RandomTensor<float>(l.x, -1, 1, 50)}},
            {"o", "i", "dx", "dy", "di", "dy_only", "di2", "dy2"});
    }
  }
}

TEST(CudaMathKernelTest, ComparisonsOfEachDtypeAgainstATensorOrOneValue) {
  REQUIRE_GPU();
  // Small integers as floats too, so equal values occur.
  Tensor xf = MakeTensor<float>({2, 4}, {1, 2, 3, 4, 5, 2, 3, 1});
  Tensor yf = MakeTensor<float>({2, 4}, {1, 3, 2, 4, 0, 2, 3, 7});
  Tensor xl = MakeTensor<int64_t>({2, 4}, {1, 2, 3, 4, 5, 2, 3, 1});
  Tensor yl = MakeTensor<int64_t>({2, 4}, {1, 3, 2, 4, 0, 2, 3, 7});
  Tensor xi = MakeTensor<int32_t>({2, 4}, {1, 2, 3, 4, 5, 2, 3, 1});
  Tensor yd = MakeTensor<double>({2, 4}, {1, 3, 2, 4, 0, 2, 3, 7});
  for (const std::string type : {"less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"}) {
    SCOPED_TRACE(type);
    const std::vector<OpDesc> ops = {MakeOp(type, {{"X", {"xf"}}, {"Y", {"yf"}}}, {{"Out", {"of"}}}),
                                     MakeOp(type, {{"X", {"xf"}}, {"Y", {"sf"}}}, {{"Out", {"osf"}}}),
                                     MakeOp(type, {{"X", {"xl"}}, {"Y", {"yl"}}}, {{"Out", {"ol"}}}),
                                     MakeOp(type, {{"X", {"xl"}}, {"Y", {"sl"}}}, {{"Out", {"osl"}}}),
                                     MakeOp(type, {{"X", {"xi"}}, {"Y", {"si"}}}, {{"Out", {"osi"}}}),
                                     MakeOp(type, {{"X", {"yd"}}, {"Y", {"yd2"}}}, {{"Out", {"od"}}}),
                                     // In place: the bools replace X's values.
                                     MakeOp(type, {{"X", {"xf2"}}, {"Y", {"sf"}}}, {{"Out", {"xf2"}}})};
    Scope cpu, gpu;
    absl::Status s = RunBoth(ops,
                             {{"xf", xf},
                              {"yf", yf},
                              {"sf", MakeTensor<float>({1}, {3})},
                              {"xl", xl},
                              {"yl", yl},
                              {"sl", MakeTensor<int64_t>({1}, {2})},
                              {"xi", xi},
                              {"si", MakeTensor<int32_t>({1}, {3})},
                              {"yd", yd},
                              {"yd2", MakeTensor<double>({2, 4}, {2, 3, 2, 1, 0, 5, 3, 7})},
                              {"xf2", RandomTensor<float>({2, 64}, 0, 4, 47)}},
                             &cpu, &gpu);
    ASSERT_TRUE(s.ok()) << s;
    for (const std::string out : {"of", "osf", "ol", "osl", "osi", "od", "xf2"}) ExpectSame<bool>(cpu, gpu, out);
  }
  // Y of another length is refused (by the shape check before the kernel).
  Scope gpu;
  SetTensor(&gpu, "x", xf);
  SetTensor(&gpu, "y", MakeTensor<float>({3}, {1, 2, 3}));
  absl::Status s = RunOpsOn({MakeOp("less_than", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"o"}}})}, &gpu, CUDAPlace(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(CudaMathKernelTest, LogicalOpsAgainstATensorOrOneValue) {
  REQUIRE_GPU();
  Tensor a = MakeTensor<bool>({5}, {true, false, true, false, true});
  Tensor b = MakeTensor<bool>({5}, {true, true, false, false, true});
  std::vector<OpDesc> ops = {MakeOp("logical_not", {{"X", {"a"}}}, {{"Out", {"not"}}})};
  std::vector<std::string> outs = {"not"};
  for (const std::string type : {"logical_and", "logical_or", "logical_xor"}) {
    ops.push_back(MakeOp(type, {{"X", {"a"}}, {"Y", {"b"}}}, {{"Out", {type}}}));
    ops.push_back(MakeOp(type, {{"X", {"a"}}, {"Y", {"one"}}}, {{"Out", {type + "_1"}}}));
    outs.push_back(type);
    outs.push_back(type + "_1");
  }
  Scope cpu, gpu;
  absl::Status s = RunBoth(ops, {{"a", a}, {"b", b}, {"one", MakeTensor<bool>({1}, {true})}}, &cpu, &gpu);
  ASSERT_TRUE(s.ok()) << s;
  for (const std::string& out : outs) ExpectSame<bool>(cpu, gpu, out);
}

TEST(CudaMathKernelTest, AssignCopiesDenseOfAnyDtypeAndSparse) {
  REQUIRE_GPU();
  Tensor ids = MakeTensor<int64_t>({4, 1}, {7, -2, 0, 9});
  ids.set_lod({{0, 1, 4}});
  Scope cpu, gpu;
  absl::Status s = RunBoth(
      {MakeOp("assign", {{"X", {"f"}}}, {{"Out", {"f2"}}}), MakeOp("assign", {{"X", {"ids"}}}, {{"Out", {"ids2"}}})},
      {{"f", RandomTensor<float>({3, 5}, -1, 1, 45)}, {"ids", ids}}, &cpu, &gpu);
  ASSERT_TRUE(s.ok()) << s;
  ExpectClose<float>(cpu, gpu, "f2", 0, 0);
  ExpectSame<int64_t>(cpu, gpu, "ids2");
  EXPECT_EQ(GpuResult(gpu, "ids2").lod(), ids.lod());

  Scope sparse;
  SelectedRows* sr = sparse.Var("sr")->GetMutable<SelectedRows>();
  sr->height = 10;
  sr->rows = {3, 1, 3};
  sr->value.CopyFrom(RandomTensor<float>({3, 4}, -1, 1, 46));
  ASSERT_TRUE(RunOpsOn({MakeOp("assign", {{"X", {"sr"}}}, {{"Out", {"sr2"}}})}, &sparse, CUDAPlace(0)).ok());
  const SelectedRows& got = sparse.FindVar("sr2")->Get<SelectedRows>();
  EXPECT_EQ(got.height, 10);
  EXPECT_EQ(got.rows, (std::vector<int64_t>{3, 1, 3}));
  EXPECT_TRUE(got.value.place() == CUDAPlace(0)) << got.value.place().ToString();
  Tensor host;
  ASSERT_TRUE(got.value.CopyTo(CPUPlace(), &host).ok());
  EXPECT_EQ(TensorToVector<float>(host), TensorToVector<float>(RandomTensor<float>({3, 4}, -1, 1, 46)));
}

}  // namespace
}  // namespace oar::testing
