// VarStore: what a pserver may receive (checked against the declaration
// before any allocation), streaming merge (equal to Fluid's `sum`), resets
// of departed trainers' copies, sparse clears, and what it may serve.
#include "pserver/var_store.h"

#include <cstring>
#include <set>

#include "common/framework/executor.h"
#include "common/framework/prepared_block.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

namespace proto = paddle::framework::proto;

void Declare(BlockDesc* b, const std::string& name, std::vector<int64_t> shape, bool persistable = false,
             bool sparse = false) {
  VarDesc* v = b->Var(name);
  v->shape = std::move(shape);
  v->persistable = persistable;
  if (sparse) v->type = proto::VarType::SELECTED_ROWS;
}

// Fluid's sync pserver layout for 2 trainers: a dense w [3, 2] and a sparse
// e [10, 2], each with copies .trainer_0/1, a sum + scale, then sgd. With
// `fluid_order` false, the sum lists the copies in another order (so the
// store keeps per-trainer copies instead of merging as they arrive).
ProgramDesc PserverProgram(bool fluid_order = true) {
  ProgramDesc p;
  BlockDesc* g = p.MutableBlock(0);
  Declare(g, "lr", {1}, true);
  for (const std::string& name : {"w", "e"}) {
    const bool sparse = name == "e";
    const std::vector<int64_t> shape = sparse ? std::vector<int64_t>{10, 2} : std::vector<int64_t>{3, 2};
    Declare(g, name, shape, true);
    Declare(g, name + "@GRAD", shape, true, sparse);
    std::vector<std::string> copies;
    for (int t : {0, 1}) {
      copies.push_back(name + "@GRAD.trainer_" + std::to_string(t));
      Declare(g, copies.back(), shape, false, sparse);
    }
    if (!fluid_order) std::swap(copies[0], copies[1]);
    BlockDesc* b = p.AppendBlock(0);
    OpDesc* sum = b->AppendOp();
    sum->type = "sum";
    sum->SetInput("X", copies);
    sum->SetOutput("Out", {name + "@GRAD"});
    OpDesc* scale = b->AppendOp();
    scale->type = "scale";
    scale->SetInput("X", {name + "@GRAD"});
    scale->SetOutput("Out", {name + "@GRAD"});
    scale->SetAttr("scale", 0.5f);
    OpDesc* sgd = b->AppendOp();
    sgd->type = "sgd";
    sgd->SetInput("Param", {name});
    sgd->SetInput("Grad", {name + "@GRAD"});
    sgd->SetInput("LearningRate", {"lr"});
    sgd->SetOutput("ParamOut", {name});
  }
  return p;
}

const std::map<std::string, int> kGradToBlock = {{"w@GRAD", 1}, {"e@GRAD", 2}};

// A message as it would arrive, over `var`.
std::unique_ptr<rpc::IncomingMessage> Message(const std::string& name, const Variable& var, int trainer) {
  sendrecv::VariableMessage meta;
  meta.set_varname(name);
  meta.set_trainer_id(trainer);
  auto h = rpc::HeaderOf(meta, var.IsInitialized() ? &var : nullptr);
  EXPECT_TRUE(h.ok()) << h.status();
  return std::make_unique<rpc::InMemoryMessage>(*std::move(h), var);
}

Variable Dense(const std::vector<float>& v, DDim dims = {3, 2}) {
  Variable out;
  *out.GetMutable<Tensor>() = MakeTensor<float>(dims, v);
  return out;
}

Variable Sparse(std::vector<int64_t> rows, const std::vector<float>& v, int64_t height = 10, int64_t width = 2) {
  Variable out;
  SelectedRows* sr = out.GetMutable<SelectedRows>();
  sr->height = height;
  sr->rows = std::move(rows);
  sr->value = MakeTensor<float>({static_cast<int64_t>(sr->rows.size()), width}, v);
  return out;
}

struct Store {
  ProgramDesc program;
  Scope scope;
  std::unique_ptr<VarStore> store;
  explicit Store(bool fluid_order = true, bool sync = true) : program(PserverProgram(fluid_order)) {
    auto s = VarStore::Create(program, &scope, 2, sync, kGradToBlock);
    EXPECT_TRUE(s.ok()) << s.status();
    store = *std::move(s);
  }
  absl::Status Receive(const std::string& name, const Variable& v, int trainer) {
    auto m = Message(name, v, trainer);
    auto r = store->Admit(m->header(), trainer);
    if (!r.ok()) return r.status();
    return store->Receive(**r, trainer, *m);
  }
  std::vector<float> Values(const std::string& name) {
    return TensorToVector<float>(scope.FindVar(name)->Get<Tensor>());
  }
};

TEST(VarStoreTest, AdmitChecksTheHeaderAgainstTheDeclaration) {
  Store s;
  struct Case {
    std::string name;
    Variable var;
    int trainer;
    std::string expect;
  };
  Variable f64;
  f64.GetMutable<Tensor>()->mutable_data<double>({3, 2});
  std::vector<Case> cases = {
      {"x@GRAD", Dense({0, 0, 0, 0, 0, 0}), 0, "this pserver receives no such variable"},
      {"w", Dense({0, 0, 0, 0, 0, 0}), 0, "is a parameter here"},
      {"w@GRAD.trainer_1", Dense({0, 0, 0, 0, 0, 0}), 0, "belongs to trainer 1"},
      {"w@GRAD", f64, 0, "float64[3, 2]: the pserver's dtype is float32"},
      {"w@GRAD", Dense({0, 0, 0, 0}, {2, 2}), 1, "float32[2, 2]: the pserver's shape is [3, 2]"},
      {"w@GRAD", Sparse({1}, {0, 0}, 3), 0, "the pserver receives it as a dense tensor"},
      {"w@GRAD", Variable(), 0, "it carries no value"},
      {"e@GRAD", Dense({0, 0, 0, 0, 0, 0}), 0, "the pserver receives it as SelectedRows"},
      {"e@GRAD", Sparse({1}, {0, 0}, 11), 0, "the pserver's height is 10"},
      {"e@GRAD", Sparse({1}, {0, 0, 0}, 10, 3), 0, "the pserver's shape is [10, 2]"},
  };
  for (const auto& c : cases) {
    auto m = Message(c.name, c.var, c.trainer);
    auto r = s.store->Admit(m->header(), c.trainer);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("trainer " + std::to_string(c.trainer)), std::string::npos) << r.status();
  }
  // Good ones: the plain name, the sender's own suffix, any number of sparse rows.
  EXPECT_TRUE(s.store->Admit(Message("w@GRAD", Dense({1, 2, 3, 4, 5, 6}), 0)->header(), 0).ok());
  EXPECT_TRUE(s.store->Admit(Message("w@GRAD.trainer_1", Dense({1, 2, 3, 4, 5, 6}), 1)->header(), 1).ok());
  EXPECT_TRUE(s.store->Admit(Message("e@GRAD", Sparse({1, 1, 9}, {1, 2, 3, 4, 5, 6}), 0)->header(), 0).ok());
  // The cap covers the largest variable with room for its header.
  EXPECT_GE(s.store->MaxRequestBytes(), 3u * 2u * 4u);
}

// The merge as gradients arrive gives bit for bit what Fluid's `sum` op
// gives over the per-trainer copies, whatever the arrival order.
TEST(VarStoreTest, StreamingMergeEqualsTheSumOp) {
  const std::vector<float> g0 = {0.1f, -2.5f, 3.3f, 1e-7f, 4.f, -0.3f}, g1 = {7.7f, 0.2f, -3.3f, 1.f, 1e8f, 0.f};
  Store s;
  ASSERT_TRUE(s.Receive("w@GRAD", Dense(g1), 1).ok());  // trainer 1 first
  ASSERT_TRUE(s.Receive("w@GRAD.trainer_0", Dense(g0), 0).ok());
  EXPECT_EQ(s.Receive("w@GRAD", Dense(g0), 0).code(), absl::StatusCode::kAlreadyExists);  // twice in a step
  ASSERT_TRUE(s.Receive("e@GRAD", Sparse({3}, {1, 2}), 1).ok());
  ASSERT_TRUE(s.Receive("e@GRAD", Sparse({5, 3}, {3, 4, 5, 6}), 0).ok());
  ASSERT_TRUE(s.store->BeforeOptimize({}).ok());
  EXPECT_EQ(s.store->merged_blocks(), (std::set<int>{1, 2}));
  // The reference: Fluid's sum op over the two copies.
  ProgramDesc ref;
  BlockDesc* b = ref.MutableBlock(0);
  for (const char* n : {"a", "b", "out"}) Declare(b, n, {3, 2}, true);
  OpDesc* sum = b->AppendOp();
  sum->type = "sum";
  sum->SetInput("X", {"a", "b"});
  sum->SetOutput("Out", {"out"});
  Scope rs;
  *rs.Var("a") = Dense(g0);
  *rs.Var("b") = Dense(g1);
  Executor exe;
  ASSERT_TRUE(exe.Run(ref, &rs).ok());
  const auto want = TensorToVector<float>(rs.FindVar("out")->Get<Tensor>());
  const auto got = s.Values("w@GRAD");
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  // Sparse: trainer 0's rows first, as `sum` joins X in order.
  const SelectedRows& e = s.scope.FindVar("e@GRAD")->Get<SelectedRows>();
  EXPECT_EQ(e.rows, (std::vector<int64_t>{5, 3, 3}));
  EXPECT_EQ(TensorToVector<float>(e.value), (std::vector<float>{3, 4, 5, 6, 1, 2}));
  EXPECT_EQ(e.height, 10);
  // After the pass, the sparse gradient is cleared and a new step begins.
  s.store->AfterOptimize();
  EXPECT_TRUE(s.scope.FindVar("e@GRAD")->Get<SelectedRows>().rows.empty());
  EXPECT_TRUE(s.Receive("w@GRAD", Dense(g0), 0).ok());
}

TEST(VarStoreTest, ALiveTrainerMissingAGradientAtTheBarrierIsAnError) {
  Store s;
  ASSERT_TRUE(s.Receive("w@GRAD", Dense({1, 1, 1, 1, 1, 1}), 0).ok());
  ASSERT_TRUE(s.Receive("e@GRAD", Sparse({1}, {1, 1}), 0).ok());
  ASSERT_TRUE(s.Receive("e@GRAD", Sparse({1}, {1, 1}), 1).ok());
  absl::Status st = s.store->BeforeOptimize({});
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("trainer 1 reached the batch barrier without sending 'w@GRAD'"), std::string::npos) << st;
  // Once trainer 1 has completed, its gradient is not expected.
  EXPECT_TRUE(s.store->BeforeOptimize({1}).ok());
  EXPECT_EQ(s.Values("w@GRAD"), (std::vector<float>{1, 1, 1, 1, 1, 1}));
}

// Regression (defect 1): a trainer that completed left its last gradient in
// its copy, and the `sum` added it again at every later step. Now the copies
// of completed trainers are zeroed, as Fluid's ResetReceivedVars does.
TEST(VarStoreTest, ACompletedTrainersCopiesAreZeroed) {
  Store s(/*fluid_order=*/false);  // per-trainer copies, summed by the block
  EXPECT_TRUE(s.store->merged_blocks().empty());
  ASSERT_TRUE(s.Receive("w@GRAD", Dense({1, 2, 3, 4, 5, 6}), 0).ok());
  ASSERT_TRUE(s.Receive("w@GRAD", Dense({9, 9, 9, 9, 9, 9}), 1).ok());
  ASSERT_TRUE(s.Receive("e@GRAD", Sparse({1}, {1, 1}), 0).ok());
  ASSERT_TRUE(s.Receive("e@GRAD", Sparse({2}, {2, 2}), 1).ok());
  ASSERT_TRUE(s.store->BeforeOptimize({}).ok());
  EXPECT_EQ(s.Values("w@GRAD.trainer_1"), (std::vector<float>{9, 9, 9, 9, 9, 9}));
  s.store->AfterOptimize();
  // Sparse copies are cleared after every pass.
  EXPECT_TRUE(s.scope.FindVar("e@GRAD.trainer_1")->Get<SelectedRows>().rows.empty());
  // Trainer 1 completes; trainer 0 goes on.
  ASSERT_TRUE(s.Receive("w@GRAD", Dense({1, 1, 1, 1, 1, 1}), 0).ok());
  ASSERT_TRUE(s.Receive("e@GRAD", Sparse({1}, {1, 1}), 0).ok());
  ASSERT_TRUE(s.store->BeforeOptimize({1}).ok());
  EXPECT_EQ(s.Values("w@GRAD.trainer_1"), (std::vector<float>{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(s.Values("w@GRAD.trainer_0"), (std::vector<float>{1, 1, 1, 1, 1, 1}));
}

TEST(VarStoreTest, OnlyParametersAreServed) {
  Store s;
  EXPECT_TRUE(s.store->CheckServable("w").ok());
  EXPECT_TRUE(s.store->CheckServable("e").ok());
  for (const char* n : {"w@GRAD", "w@GRAD.trainer_0", "lr", "nope"}) {
    EXPECT_EQ(s.store->CheckServable(n).code(), absl::StatusCode::kNotFound) << n;
  }
}

TEST(VarStoreTest, AsyncGradientsGoToTheCallersScope) {
  Store s(true, /*sync=*/false);
  EXPECT_TRUE(s.store->merged_blocks().empty());
  auto m = Message("w@GRAD", Dense({1, 2, 3, 4, 5, 6}), 1);
  auto r = s.store->Admit(m->header(), 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(s.store->BlockOf(**r), 1);
  Scope& local = s.scope.NewScope();
  s.store->ReceiveInto(**r, *m, &local);
  EXPECT_EQ(TensorToVector<float>(local.FindLocalVar("w@GRAD")->Get<Tensor>()), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  s.scope.DeleteScope(&local);
}

// An elastic job's store keeps every trainer's copy (a trainer that leaves
// mid-step must be taken out of it) and, at the barrier, makes the
// program's sum over the slots, scaled by 1/slots, the contributors' mean:
// each contributor's copy counts times slots/contributors, the others not
// at all. A dense gradient's sum is the store's (the block runs without its
// `sum`), a sparse one's the block's over the copies.
TEST(VarStoreTest, AnElasticStepIsTheMeanOfItsContributors) {
  ProgramDesc program = PserverProgram();
  Scope scope;
  auto created = VarStore::Create(program, &scope, 2, /*sync_mode=*/true, kGradToBlock, /*elastic=*/true);
  ASSERT_TRUE(created.ok()) << created.status();
  VarStore& store = **created;
  EXPECT_EQ(store.merged_blocks(), std::set<int>({1}));  // w's; e's block sums its copies itself
  auto receive = [&](const std::string& name, const Variable& v, int trainer) {
    auto m = Message(name, v, trainer);
    auto r = store.Admit(m->header(), trainer);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(store.Receive(**r, trainer, *m).ok());
  };
  receive("w@GRAD", Dense({1, 2, 3, 4, 5, 6}), 1);
  receive("e@GRAD", Sparse({4}, {1.5f, -2}), 1);
  for (const VarStore::Receivable* r : store.receivables()) {
    const absl::Status missing = store.FinalizeAmong(*r, {0, 1});
    EXPECT_TRUE(absl::IsFailedPrecondition(missing)) << missing;
    EXPECT_NE(missing.message().find("trainer 0 contributed to the step without sending"), std::string::npos);
    ASSERT_TRUE(store.FinalizeAmong(*r, {1}).ok());
  }
  auto values = [&](const std::string& name) { return TensorToVector<float>(scope.FindVar(name)->Get<Tensor>()); };
  EXPECT_EQ(values("w@GRAD"), std::vector<float>({2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(values("w@GRAD.trainer_1"), std::vector<float>({1, 2, 3, 4, 5, 6}));  // the copy is kept as sent
  const SelectedRows& e1 = scope.FindVar("e@GRAD.trainer_1")->Get<SelectedRows>();
  EXPECT_EQ(e1.rows, std::vector<int64_t>({4}));
  EXPECT_EQ(TensorToVector<float>(e1.value), std::vector<float>({3, -4}));
  EXPECT_TRUE(scope.FindVar("e@GRAD.trainer_0")->Get<SelectedRows>().rows.empty());
  // The pserver's block on them, as it runs it (w's without its sum):
  // scale 1/2, sgd with lr 1 -> w - mean.
  Executor exe(CPUPlace());
  *scope.Var("lr")->GetMutable<Tensor>() = MakeTensor<float>({1}, {1});
  *scope.Var("w")->GetMutable<Tensor>() = MakeTensor<float>({3, 2}, {0, 0, 0, 0, 0, 0});
  ProgramDesc runnable = program;
  runnable.MutableBlock(1)->RemoveOps(0, 1);
  OpDesc* scale = runnable.MutableBlock(1)->MutableOp(0);
  scale->SetAttr("bias", 0.0f);
  scale->SetAttr("bias_after_scale", true);
  auto block = exe.Prepare(runnable, 1);
  ASSERT_TRUE(block.ok()) << block.status();
  ASSERT_TRUE(exe.RunPrepared(block->get(), &scope).ok());
  EXPECT_EQ(values("w"), std::vector<float>({-1, -2, -3, -4, -5, -6}));  // trainer 1's own gradient
}

// The sum made ahead (SumAhead, once the likely contributors all sent) is
// the one a barrier keeps when they are the contributors; when one of them
// left before the barrier, the barrier's sum is made again from the copies
// of those that stayed. Either way it is the sum over the copies in trainer
// order, each scaled as `scale` would (float(copy x slots/contributors)).
TEST(VarStoreTest, AnElasticSumMadeAheadHoldsOnlyForItsContributors) {
  ProgramDesc program = PserverProgram();
  Scope scope;
  auto created = VarStore::Create(program, &scope, 2, /*sync_mode=*/true, kGradToBlock, /*elastic=*/true);
  ASSERT_TRUE(created.ok()) << created.status();
  VarStore& store = **created;
  const VarStore::Receivable* w = nullptr;
  auto receive = [&](const Variable& v, int trainer) {
    auto m = Message("w@GRAD", v, trainer);
    auto r = store.Admit(m->header(), trainer);
    ASSERT_TRUE(r.ok()) << r.status();
    w = *r;
    ASSERT_TRUE(store.Receive(**r, trainer, *m).ok());
  };
  auto sum = [&] { return TensorToVector<float>(scope.FindVar("w@GRAD")->Get<Tensor>()); };
  const std::vector<float> a = {0.1f, 0.2f, 0.3f, 1e8f, -1, 3}, b = {0.7f, 0.11f, -0.3f, 1, 1, 1e-8f};
  receive(Dense(a), 0);
  store.SumAhead(*w, {0, 1});
  EXPECT_EQ(scope.FindVar("w@GRAD"), nullptr);  // trainer 1 has not sent yet: nothing summed
  receive(Dense(b), 1);
  store.SumAhead(*w, {0, 1});
  std::vector<float> both(6);
  for (size_t i = 0; i < 6; ++i) both[i] = (0.0f + a[i]) + b[i];
  EXPECT_EQ(sum(), both);
  ASSERT_TRUE(store.FinalizeAmong(*w, {0, 1}).ok());
  EXPECT_EQ(sum(), both);
  store.Release(*w);

  // The next step: summed ahead over both, but trainer 0 left before the barrier.
  receive(Dense(b), 0);
  receive(Dense(a), 1);
  store.SumAhead(*w, {0, 1});
  ASSERT_TRUE(store.FinalizeAmong(*w, {1}).ok());
  std::vector<float> alone(6);
  for (size_t i = 0; i < 6; ++i) alone[i] = 0.0f + static_cast<float>(a[i] * 2.0);
  EXPECT_EQ(sum(), alone);
  // A trainer that sends again after the sum was made: the barrier sums anew.
  store.Release(*w);
  receive(Dense(a), 0);
  receive(Dense(a), 1);
  store.SumAhead(*w, {0, 1});
  receive(Dense(b), 1);
  ASSERT_TRUE(store.FinalizeAmong(*w, {0, 1}).ok());
  EXPECT_EQ(sum(), both);
}

}  // namespace
}  // namespace oar
