#include "common/framework/executor.h"

#include <sys/mman.h>

#include <algorithm>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

// y = relu(x · w) with w persistable and preset in the scope.
struct TinyNet {
  ProgramDesc program;
  Scope scope;
  TinyNet() {
    BlockDesc* b = program.MutableBlock(0);
    VarDesc* x = b->Var("x");
    x->shape = {-1, 2};
    VarDesc* w = b->Var("w");
    w->shape = {2, 1};
    w->persistable = true;
    b->Var("h");
    b->Var("y");
    OpDesc* mul = b->AppendOp();
    mul->type = "mul";
    mul->SetInput("X", {"x"});
    mul->SetInput("Y", {"w"});
    mul->SetOutput("Out", {"h"});
    OpDesc* relu = b->AppendOp();
    relu->type = "relu";
    relu->SetInput("X", {"h"});
    relu->SetOutput("Out", {"y"});
    *scope.Var("w")->GetMutable<Tensor>() = MakeTensor<float>({2, 1}, {1, -1});
  }
};

TEST(ExecutorTest, FeedsRunsAndFetches) {
  TinyNet net;
  Executor exe;
  auto out = exe.Run(net.program, &net.scope, {{"x", MakeTensor<float>({2, 2}, {3, 1, 1, 3})}}, {"y", "h"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(TensorToVector<float>((*out)[0]), (std::vector<float>{2, 0}));
  EXPECT_EQ(TensorToVector<float>((*out)[1]), (std::vector<float>{2, -2}));
  // Temporaries do not outlive the run; persistables and feed/fetch do.
  EXPECT_EQ(net.scope.FindVar("h"), nullptr);
  EXPECT_NE(net.scope.FindVar("fetch"), nullptr);
}

TEST(ExecutorTest, FetchedTensorsSurviveTheNextRun) {
  TinyNet net;
  Executor exe;
  auto a = exe.Run(net.program, &net.scope, {{"x", MakeTensor<float>({1, 2}, {5, 1})}}, {"y"});
  auto b = exe.Run(net.program, &net.scope, {{"x", MakeTensor<float>({1, 2}, {9, 1})}}, {"y"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)[0].data<float>()[0], 4);
  EXPECT_EQ((*b)[0].data<float>()[0], 8);
}

TEST(ExecutorTest, SeesEditsToACachedProgram) {
  TinyNet net;
  Executor exe;
  ASSERT_TRUE(exe.Run(net.program, &net.scope, {{"x", MakeTensor<float>({1, 2}, {1, 3})}}, {"y"}).ok());
  net.program.MutableBlock(0)->MutableOp(1)->type = "sigmoid";
  auto out = exe.Run(net.program, &net.scope, {{"x", MakeTensor<float>({1, 2}, {1, 3})}}, {"y"});
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR((*out)[0].data<float>()[0], 1 / (1 + std::exp(2.0f)), 1e-6);
}

TEST(ExecutorTest, KeepingTheLocalScopeGivesTheSameResults) {
  TinyNet net;
  Executor exe(CPUPlace(), ExecutorOptions{.num_iteration_per_drop_scope = 5});
  for (float v : {1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f}) {
    auto out = exe.Run(net.program, &net.scope, {{"x", MakeTensor<float>({1, 2}, {v, 0})}}, {"y"});
    ASSERT_TRUE(out.ok());
    EXPECT_EQ((*out)[0].data<float>()[0], v);
  }
}

TEST(ExecutorTest, MissingFeedNamesTheVariable) {
  TinyNet net;
  Executor exe;
  auto out = exe.Run(net.program, &net.scope, {}, {"y"});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(out.status().message().find("'x'"), std::string::npos) << out.status();
  EXPECT_NE(out.status().message().find("op #0"), std::string::npos) << out.status();
}

TEST(ExecutorTest, UnknownFetchTargetIsNotFound) {
  TinyNet net;
  Executor exe;
  auto out = exe.Run(net.program, &net.scope, {{"x", MakeTensor<float>({1, 2}, {1, 1})}}, {"nope"});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(out.status().message().find("'nope'"), std::string::npos);
}

TEST(ExecutorTest, FeedWithWrongShapeOrDtypeIsRejected) {
  TinyNet net;
  net.program.MutableBlock(0)->FindMutableVar("x")->need_check_feed = true;
  Executor exe;
  auto shape = exe.Run(net.program, &net.scope, {{"x", MakeTensor<float>({2, 3}, {})}}, {"y"});
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shape.status().message(), "feed 'x': expected float32[-1, 2], got float32[2, 3]");
  auto dtype = exe.Run(net.program, &net.scope, {{"x", MakeTensor<int64_t>({2, 2}, {})}}, {"y"});
  EXPECT_EQ(dtype.status().message(), "feed 'x': expected float32[-1, 2], got int64[2, 2]");
  auto unknown = exe.Run(net.program, &net.scope, {{"q", MakeTensor<float>({1}, {1})}}, {"y"});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ExecutorTest, ShapeMismatchNamesOpAndSlot) {
  TinyNet net;
  *net.scope.Var("w")->GetMutable<Tensor>() = MakeTensor<float>({3, 1}, {1, 1, 1});
  Executor exe;
  auto out = exe.Run(net.program, &net.scope, {{"x", MakeTensor<float>({1, 2}, {1, 1})}}, {"y"});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("block 0, op #0: mul"), std::string::npos) << out.status();
}

TEST(ExecutorTest, UnknownOpTypeIsNotFoundWithLocation) {
  TinyNet net;
  net.program.MutableBlock(0)->MutableOp(1)->type = "frobnicate";
  Executor exe;
  auto out = exe.Run(net.program, &net.scope, {{"x", MakeTensor<float>({1, 2}, {1, 1})}}, {"y"});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound);
  // Numbered as in the program (and `oar inspect`), not counting the feed op
  // the executor put before it.
  EXPECT_NE(out.status().message().find("block 0, op #1: "), std::string::npos) << out.status();
  EXPECT_NE(out.status().message().find("'frobnicate'"), std::string::npos);
}

// An op the executor added is named by what it feeds or fetches: it has no
// number in the program.
TEST(ExecutorTest, AnErrorInAnAddedFetchNamesItsVariable) {
  TinyNet net;
  net.program.MutableBlock(0)->Var("never_written");
  *net.scope.Var("w")->GetMutable<Tensor>() = MakeTensor<float>({2, 1}, {1, 1});
  Executor exe;
  auto out = exe.Run(net.program, &net.scope, {{"x", MakeTensor<float>({1, 2}, {1, 1})}}, {"never_written"});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("block 0, the fetch of 'never_written'"), std::string::npos) << out.status();
}

TEST(ExecutorTest, AddFeedFetchOpsFollowsFluidLayout) {
  ProgramDesc p;
  p.MutableBlock(0)->Var("a");
  p.MutableBlock(0)->Var("b");
  AddFeedFetchOps(&p, {"a", "b"}, {"b"});
  const BlockDesc& blk = p.Block(0);
  ASSERT_EQ(blk.OpSize(), 3u);
  EXPECT_EQ(blk.Op(0).type, "feed");
  EXPECT_EQ(blk.Op(0).Output("Out")[0], "b");  // prepended, so the last feed comes first
  EXPECT_EQ(blk.Op(0).GetAttr<int32_t>("col"), 1);
  EXPECT_EQ(blk.Op(2).type, "fetch");
  EXPECT_EQ(blk.FindVar("feed")->type, paddle::framework::proto::VarType::FEED_MINIBATCH);
  EXPECT_TRUE(blk.FindVar("fetch")->persistable);
}

TEST(ExecutorTest, TrainsLinearRegressionWithSgd) {
  UniqueNameGuard names;
  Program main, startup;
  main.set_random_seed(3);
  startup.set_random_seed(3);
  Var loss;
  {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {1});
    Var y = layers::data("y", {1});
    loss = layers::mean(layers::square_error_cost(layers::fc(x, 1), y));
    optimizer::SGD(0.1f).minimize(loss);
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  Executor exe;
  Scope scope;
  ASSERT_TRUE(exe.Run(startup.desc(), &scope).ok());
  Tensor xs = MakeTensor<float>({4, 1}, {0, 1, 2, 3});
  Tensor ys = MakeTensor<float>({4, 1}, {1, 3, 5, 7});  // y = 2x + 1
  float first = 0, last = 0;
  for (int i = 0; i < 300; ++i) {
    auto out = exe.Run(main.desc(), &scope, {{"x", xs}, {"y", ys}}, {loss.name()});
    ASSERT_TRUE(out.ok()) << out.status();
    (i == 0 ? first : last) = (*out)[0].data<float>()[0];
  }
  EXPECT_GT(first, 1.0f);
  EXPECT_LT(last, 1e-3f);
  EXPECT_NEAR(scope.FindVar("fc_0.w_0")->Get<Tensor>().data<float>()[0], 2.0f, 0.05f);
  EXPECT_NEAR(scope.FindVar("fc_0.b_0")->Get<Tensor>().data<float>()[0], 1.0f, 0.1f);
}

}  // namespace
}  // namespace oar

namespace oar {
namespace {

// Regression: the Executor's cached local scope outlived the caller's Scope,
// and its destructor (or a later Run with a new Scope at the same address)
// touched freed memory.
TEST(ExecutorTest, RegressionScopeDestroyedBeforeExecutor) {
  TinyNet net;
  Executor exe;
  for (int round = 0; round < 3; ++round) {
    auto scope = std::make_unique<Scope>();
    *scope->Var("w")->GetMutable<Tensor>() = MakeTensor<float>({2, 1}, {1, static_cast<float>(round)});
    auto out = exe.Run(net.program, scope.get(), {{"x", MakeTensor<float>({1, 2}, {1, 1})}}, {"y"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].data<float>()[0], 1.0f + round);  // not a stale binding to the old scope
  }                                                       // each scope dies while the Executor keeps its cache
}

}  // namespace
}  // namespace oar

namespace oar {
namespace {

// A program of one in-place op, `type`(X = v, Out = v), over a persistable
// float vector v of `n` elements; `kernel` registered for it in `registry`.
ProgramDesc InPlaceProgram(OpRegistry& registry, const std::string& type, KernelFn kernel, int64_t n) {
  registry.Register(type)
      .Input("X")
      .Output("Out")
      .SetInferShape([](InferShapeContext& c) {
        c.SetOutputDim("Out", c.InputDim("X"));
        return absl::OkStatus();
      })
      .Kernel<float>(kernel);
  ProgramDesc p;
  VarDesc* v = p.MutableBlock(0)->Var("v");
  v->shape = {n};
  v->persistable = true;
  OpDesc* op = p.MutableBlock(0)->AppendOp();
  op->type = type;
  op->SetInput("X", {"v"});
  op->SetOutput("Out", {"v"});
  return p;
}

// The other owner of an in-place op's buffer lets it go while the kernel
// runs (as an RPC reply finishing mid-optimize does). 64 MiB is above
// glibc's mmap threshold, so without the executor's hold on the input the
// read below touches unmapped memory and the test crashes.
Tensor* g_other_owner = nullptr;

absl::Status ReleasingAddOne(const ExecutionContext& ctx) {
  const Tensor* x = ctx.Input("X");
  const float* in = x->data<float>();
  float* out = ctx.Output("Out")->mutable_data<float>(x->dims());  // shared: a fresh buffer
  *g_other_owner = Tensor();                                       // the other owner lets go
  for (int64_t i = 0; i < x->numel(); ++i) out[i] = in[i] + 1;
  return absl::OkStatus();
}

TEST(ExecutorTest, InPlaceKernelsReadTheirInputEvenWhenItsOtherOwnerLetsGo) {
  OpRegistry registry;
  const ProgramDesc p = InPlaceProgram(registry, "releasing_add_one", ReleasingAddOne, 16 << 20);
  Scope scope;
  Tensor* t = scope.Var("v")->GetMutable<Tensor>();
  float* d = t->mutable_data<float>({16 << 20});
  std::fill(d, d + t->numel(), 1.0f);
  Tensor other = *t;  // shares the buffer
  g_other_owner = &other;
  Executor exe(CPUPlace(), {}, &registry);
  auto s = exe.Run(p, &scope);
  ASSERT_TRUE(s.ok()) << s.status();
  const Tensor& r = scope.FindVar("v")->Get<Tensor>();
  EXPECT_EQ(r.data<float>()[0], 2.0f);
  EXPECT_EQ(r.data<float>()[r.numel() - 1], 2.0f);
}

// The same for a SelectedRows bound in place (scale on a merged sparse
// gradient that an RPC send still holds): its values are held too.
absl::Status ReleasingSparseAddOne(const ExecutionContext& ctx) {
  const SelectedRows& x = ctx.InputVar("X")->Get<SelectedRows>();
  const float* in = x.value.data<float>();
  SelectedRows* out = ctx.OutputVar("Out")->GetMutable<SelectedRows>();
  float* o = out->value.mutable_data<float>(x.value.dims());  // shared: a fresh buffer
  *g_other_owner = Tensor();                                  // the other owner lets go
  for (int64_t i = 0; i < out->value.numel(); ++i) o[i] = in[i] + 1;
  return absl::OkStatus();
}

TEST(ExecutorTest, InPlaceSparseKernelsReadTheirInputEvenWhenItsOtherOwnerLetsGo) {
  OpRegistry registry;
  registry.Register("releasing_sparse_add_one")
      .Input("X")
      .Output("Out")
      .SetInferShape([](InferShapeContext&) { return absl::OkStatus(); })
      .Kernel<float>(ReleasingSparseAddOne);
  ProgramDesc p;
  VarDesc* v = p.MutableBlock(0)->Var("v");
  v->type = paddle::framework::proto::VarType::SELECTED_ROWS;
  v->persistable = true;
  OpDesc* op = p.MutableBlock(0)->AppendOp();
  op->type = "releasing_sparse_add_one";
  op->SetInput("X", {"v"});
  op->SetOutput("Out", {"v"});
  Scope scope;
  SelectedRows* sr = scope.Var("v")->GetMutable<SelectedRows>();
  sr->height = 1 << 20;
  sr->rows = {3, 7};
  float* d = sr->value.mutable_data<float>({2, 8 << 20});
  std::fill(d, d + sr->value.numel(), 1.0f);
  Tensor other = sr->value;  // shares the buffer
  g_other_owner = &other;
  Executor exe(CPUPlace(), {}, &registry);
  auto s = exe.Run(p, &scope);
  ASSERT_TRUE(s.ok()) << s.status();
  const Tensor& r = scope.FindVar("v")->Get<SelectedRows>().value;
  EXPECT_EQ(r.data<float>()[0], 2.0f);
  EXPECT_EQ(r.data<float>()[r.numel() - 1], 2.0f);
}

absl::Status AddOne(const ExecutionContext& ctx) {
  const Tensor* x = ctx.Input("X");
  const float* in = x->data<float>();
  float* out = ctx.Output("Out")->mutable_data<float>(x->dims());  // read-only: a fresh buffer
  for (int64_t i = 0; i < x->numel(); ++i) out[i] = in[i] + 1;
  return absl::OkStatus();
}

// An in-place op over a read-only view (a slice a pserver lent) whose
// mapping only that view keeps: mutable_data gives the output a buffer of
// its own, and without the executor's hold the mapping would go (munmap)
// while the kernel still reads it, and the test would crash.
TEST(ExecutorTest, InPlaceKernelsReadAReadOnlyViewWhoseMappingOnlyItKeeps) {
  OpRegistry registry;
  const ProgramDesc p = InPlaceProgram(registry, "add_one", AddOne, 1024);
  const size_t bytes = 1024 * sizeof(float);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  std::fill(static_cast<float*>(mem), static_cast<float*>(mem) + 1024, 1.0f);
  ASSERT_EQ(mprotect(mem, bytes, PROT_READ), 0);
  Scope scope;
  *scope.Var("v")->GetMutable<Tensor>() = Tensor::OverReadOnlyMemory(
      mem, DDim{1024}, DataType::kFloat32, std::shared_ptr<void>(mem, [bytes](void* m) { munmap(m, bytes); }));
  Executor exe(CPUPlace(), {}, &registry);
  auto s = exe.Run(p, &scope);
  ASSERT_TRUE(s.ok()) << s.status();
  const Tensor& r = scope.FindVar("v")->Get<Tensor>();
  EXPECT_TRUE(r.Writable());
  EXPECT_EQ(r.data<float>()[0], 2.0f);
  EXPECT_EQ(r.data<float>()[1023], 2.0f);
}

}  // namespace
}  // namespace oar
