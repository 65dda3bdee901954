// Sync and async pserver loops with real optimize blocks, a pserver program
// run by an Executor (listen_and_serv) on a thread and trainers as threads
// talking gRPC on loopback, against a single-process reference.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/rpc/rpc_client.h"
#include "gtest/gtest.h"
#include "tests/pserver/dist_fixture.h"
#include "tests/util/trainer_net.h"

namespace oar {
namespace {

constexpr int kSteps = 10;
constexpr int kBatch = 8;

// The reference: one process, the global batch, kSteps steps.
std::vector<float> ReferenceLosses(std::vector<float>* w = nullptr) {
  DistPrograms d("127.0.0.1:1", 1, true);
  Executor exe;
  Scope scope;
  EXPECT_TRUE(exe.Run(d.startup.desc(), &scope).ok());
  std::vector<float> out;
  for (int s = 0; s < kSteps; ++s) {
    auto r = exe.Run(d.main.desc(), &scope, DistPrograms::Batch(s, 0, kBatch), {d.loss.name()});
    EXPECT_TRUE(r.ok()) << r.status();
    out.push_back(TensorToVector<float>((*r)[0])[0]);
  }
  if (w) *w = TensorToVector<float>(scope.FindVar(d.params_grads[0].first)->Get<Tensor>());
  return out;
}

// Starts the pserver program on a thread; `endpoint` is where it serves.
struct PserverThread {
  ServingNet net;
  Scope scope;
  Executor exe;
  absl::Status result;
  std::thread thread;
  std::string endpoint;

  PserverThread(int trainers, bool sync, int deadline_ms = 20000) : net(deadline_ms), exe(CPUPlace(), net.options()) {
    auto d = std::make_shared<DistPrograms>("127.0.0.1:0", trainers, sync);
    EXPECT_TRUE(exe.Run(d->startup.desc(), &scope).ok());  // the same initial values as the reference
    thread = std::thread([this, d] { result = exe.Run(d->pserver, &scope).status(); });
    endpoint = net.WaitEndpoint();
    EXPECT_FALSE(endpoint.empty()) << "the pserver never served";
  }
  absl::Status Join() {
    thread.join();
    return result;
  }
};

// One trainer: pulls the parameters, runs kSteps steps on its share of each
// global batch, then says COMPLETE. Returns its per-step losses.
std::vector<float> RunTrainer(const std::string& ep, int id, int trainers, bool sync, int steps = kSteps,
                              absl::Status* error = nullptr, int deadline_ms = 20000) {
  DistPrograms d(ep, trainers, sync);
  for (auto* p : {&d.trainer, &d.trainer_startup}) {
    for (size_t i = 0; i < p->Block(0).OpSize(); ++i) {
      p->MutableBlock(0)->MutableOp(i)->SetAttr("trainer_id", int32_t{id});
    }
  }
  TrainerNet net(nullptr, {.deadline_ms = deadline_ms});
  Executor exe(CPUPlace(), net.options());
  Scope scope;
  std::vector<float> losses;
  auto s = exe.Run(d.trainer_startup, &scope);
  if (error != nullptr) {  // a failure is expected: report it, do not assert
    *error = s.status();
    for (int step = 0; step < steps && error->ok(); ++step) {
      *error = exe.Run(d.trainer, &scope, DistPrograms::Batch(step, 0, 1), {d.loss.name()}).status();
    }
    return losses;
  }
  EXPECT_TRUE(s.ok()) << s.status();
  const int per = kBatch / trainers;
  for (int step = 0; step < steps && s.ok(); ++step) {
    auto r = exe.Run(d.trainer, &scope, DistPrograms::Batch(step, id * per, (id + 1) * per), {d.loss.name()});
    EXPECT_TRUE(r.ok()) << "trainer " << id << ": " << r.status();
    if (!r.ok()) break;
    losses.push_back(TensorToVector<float>((*r)[0])[0]);
  }
  EXPECT_TRUE(net.client.AsyncSendComplete(ep, id)->Wait().ok());
  return losses;
}

TEST(PserverLoopTest, SyncTwoTrainersMatchTheSingleProcessLossPerStep) {
  std::vector<float> ref_w;
  const std::vector<float> ref = ReferenceLosses(&ref_w);
  PserverThread ps(2, /*sync=*/true);
  ASSERT_FALSE(ps.endpoint.empty());
  std::vector<float> l0, l1;
  std::thread t0([&] { l0 = RunTrainer(ps.endpoint, 0, 2, true); });
  std::thread t1([&] { l1 = RunTrainer(ps.endpoint, 1, 2, true); });
  t0.join();
  t1.join();
  absl::Status s = ps.Join();
  EXPECT_TRUE(s.ok()) << s;
  ASSERT_EQ(l0.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(l1.size(), static_cast<size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) EXPECT_NEAR((l0[i] + l1[i]) / 2, ref[i], 1e-5) << "step " << i;
  EXPECT_LT(ref[kSteps - 1], ref[0]);
  DistPrograms names("x:1", 1, true);
  const auto w = TensorToVector<float>(ps.scope.FindVar(names.params_grads[0].first)->Get<Tensor>());
  ASSERT_EQ(w.size(), ref_w.size());
  for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(w[i], ref_w[i], 1e-5);
}

TEST(PserverLoopTest, SyncTrainerThatStopsEarlyLetsTheOtherFinish) {
  PserverThread ps(2, true);
  ASSERT_FALSE(ps.endpoint.empty());
  std::vector<float> l0, l1;
  std::thread t0([&] { l0 = RunTrainer(ps.endpoint, 0, 2, true, 3); });  // uneven shards
  std::thread t1([&] { l1 = RunTrainer(ps.endpoint, 1, 2, true, kSteps); });
  t0.join();
  t1.join();
  EXPECT_TRUE(ps.Join().ok());
  EXPECT_EQ(l0.size(), 3u);
  EXPECT_EQ(l1.size(), static_cast<size_t>(kSteps));
}

TEST(PserverLoopTest, AsyncOneTrainerEqualsSequentialSgd) {
  const std::vector<float> ref = ReferenceLosses();
  PserverThread ps(1, /*sync=*/false);
  ASSERT_FALSE(ps.endpoint.empty());
  std::vector<float> l = RunTrainer(ps.endpoint, 0, 1, false);
  EXPECT_TRUE(ps.Join().ok());
  ASSERT_EQ(l.size(), static_cast<size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) EXPECT_NEAR(l[i], ref[i], 1e-5) << "step " << i;
}

TEST(PserverLoopTest, AsyncTwoTrainersTrain) {
  PserverThread ps(2, false);
  ASSERT_FALSE(ps.endpoint.empty());
  std::vector<float> l0, l1;
  std::thread t0([&] { l0 = RunTrainer(ps.endpoint, 0, 2, false, 30); });
  std::thread t1([&] { l1 = RunTrainer(ps.endpoint, 1, 2, false, 30); });
  t0.join();
  t1.join();
  EXPECT_TRUE(ps.Join().ok());
  ASSERT_EQ(l0.size(), 30u);
  // Well below the start: the mean of the last 5 losses against the first 5.
  for (const auto* l : {&l0, &l1}) {
    float first = 0, last = 0;
    for (int i = 0; i < 5; ++i) {
      first += (*l)[i];
      last += (*l)[l->size() - 1 - i];
    }
    EXPECT_LT(last, 0.5f * first) << "first " << first / 5 << " last " << last / 5;
  }
}

TEST(PserverLoopTest, ATrainerThatNeverArrivesFailsThePserverNamingIt) {
  PserverThread ps(2, true, /*deadline_ms=*/500);
  ASSERT_FALSE(ps.endpoint.empty());
  absl::Status trainer_error;
  std::thread t0([&] { RunTrainer(ps.endpoint, 0, 2, true, 1, &trainer_error, /*deadline_ms=*/500); });
  absl::Status s = ps.Join();
  t0.join();
  // The live trainer fails too, within its deadline, naming the pserver.
  EXPECT_FALSE(trainer_error.ok());
  EXPECT_NE(trainer_error.message().find(ps.endpoint), std::string::npos) << trainer_error;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("trainer(s) 1 never arrived"), std::string::npos) << s;
  EXPECT_NE(s.message().find("pserver 127.0.0.1:"), std::string::npos) << s;
}

}  // namespace
}  // namespace oar

namespace oar {
namespace {

// The user's path end to end: the trainer's Executor runs the RPC ops, then
// a checkpoint_notify op, then Executor::Close() says COMPLETE, and the
// pserver's listen_and_serv returns.
TEST(PserverLoopTest, ExecutorCloseCompletesAndCheckpointNotifyOpSaves) {
  PserverThread ps(1, true);
  ASSERT_FALSE(ps.endpoint.empty());
  DistPrograms d(ps.endpoint, 1, true);
  TrainerNet net(nullptr, {.deadline_ms = 20000});
  Executor exe(CPUPlace(), net.options());
  Scope scope;
  ASSERT_TRUE(exe.Run(d.trainer_startup, &scope).ok());
  for (int step = 0; step < 3; ++step) {
    auto r = exe.Run(d.trainer, &scope, DistPrograms::Batch(step, 0, kBatch), {d.loss.name()});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  const std::string dir = ::testing::TempDir() + "/oar_notify_ckpt";
  std::filesystem::remove_all(dir);
  ProgramDesc notify;
  OpDesc* op = notify.MutableBlock(0)->AppendOp();
  op->type = "checkpoint_notify";
  op->SetAttr("epmap", std::vector<std::string>{ps.endpoint});
  op->SetAttr("dir", dir);
  auto st = exe.Run(notify, &scope);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(std::filesystem::exists(dir + "/pserver_0/__manifest__"));
  absl::Status closed = exe.Close();
  EXPECT_TRUE(closed.ok()) << closed;
  EXPECT_TRUE(ps.Join().ok());  // returns: the only trainer completed
}

TEST(DistOpsTest, SplitByrefMakesViewsNotCopies) {
  OpRegistry::ExtendGlobal(RegisterDistOps);
  ProgramDesc p;
  BlockDesc* b = p.MutableBlock(0);
  b->Var("x")->shape = {5, 2};
  for (const char* n : {"x", "a", "b"}) b->Var(n)->persistable = true;
  OpDesc* op = b->AppendOp();
  op->type = "split_byref";
  op->SetInput("X", {"x"});
  op->SetOutput("Out", {"a", "b"});
  op->SetAttr("sections", std::vector<int32_t>{2, 3});
  Executor exe;
  Scope scope;
  Tensor x = MakeTensor<float>({5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  *scope.Var("x")->GetMutable<Tensor>() = x;
  auto ran = exe.Run(p, &scope);
  ASSERT_TRUE(ran.ok()) << ran.status();
  ASSERT_NE(scope.FindVar("b"), nullptr);
  const Tensor& bt = scope.FindVar("b")->Get<Tensor>();
  EXPECT_EQ(bt.dims(), (DDim{3, 2}));
  EXPECT_EQ(bt.data<float>(), x.data<float>() + 4);  // the same memory
  p.MutableBlock(0)->MutableOp(0)->SetAttr("sections", std::vector<int32_t>{2, 2});
  EXPECT_NE(exe.Run(p, &scope).status().message().find("sections add up to 4 rows, X has 5"), std::string::npos);
}

TEST(DistOpsTest, SplitSelectedRowsCutsRowsByHeightSections) {
  OpRegistry::ExtendGlobal(RegisterDistOps);
  ProgramDesc p;
  BlockDesc* b = p.MutableBlock(0);
  for (const char* n : {"g", "g0", "g1"}) {
    b->Var(n)->type = paddle::framework::proto::VarType::SELECTED_ROWS;
    b->Var(n)->persistable = true;
  }
  OpDesc* op = b->AppendOp();
  op->type = "split_selected_rows";
  op->SetInput("X", {"g"});
  op->SetOutput("Out", {"g0", "g1"});
  op->SetAttr("height_sections", std::vector<int64_t>{4, 6});
  Executor exe;
  Scope scope;
  SelectedRows* g = scope.Var("g")->GetMutable<SelectedRows>();
  g->height = 10;
  g->rows = {7, 1, 4, 1};
  g->value = MakeTensor<float>({4, 2}, {70, 71, 10, 11, 40, 41, 12, 13});
  auto ran = exe.Run(p, &scope);
  ASSERT_TRUE(ran.ok()) << ran.status();
  const SelectedRows& g0 = scope.FindVar("g0")->Get<SelectedRows>();
  const SelectedRows& g1 = scope.FindVar("g1")->Get<SelectedRows>();
  EXPECT_EQ(g0.height, 4);
  EXPECT_EQ(g0.rows, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(TensorToVector<float>(g0.value), (std::vector<float>{10, 11, 12, 13}));
  EXPECT_EQ(g1.height, 6);
  EXPECT_EQ(g1.rows, (std::vector<int64_t>{3, 0}));  // rows 7 and 4, counted from row 4
  EXPECT_EQ(TensorToVector<float>(g1.value), (std::vector<float>{70, 71, 40, 41}));
  g->rows = {12, 0, 0, 0};
  EXPECT_NE(exe.Run(p, &scope).status().message().find("row 12 is outside"), std::string::npos);
}

}  // namespace
}  // namespace oar

namespace oar {
namespace {

// Adds an LR-decay block (here: a step counter the block increments) to the
// fixture's pserver program.
void AddLrBlock(ProgramDesc* pserver) {
  VarDesc* step = pserver->MutableBlock(0)->Var("lr_step");
  step->shape = {1};
  step->persistable = true;
  BlockDesc* lr = pserver->AppendBlock(0);
  OpDesc* inc = lr->AppendOp();
  inc->type = "increment";
  inc->SetInput("X", {"lr_step"});
  inc->SetOutput("Out", {"lr_step"});
  pserver->MutableBlock(0)->MutableOp(0)->SetAttr("lr_decay_block_id", static_cast<int32_t>(pserver->NumBlocks() - 1));
}

class LrBlockTest : public ::testing::TestWithParam<bool> {};

TEST_P(LrBlockTest, TheLrDecayBlockRunsOncePerStep) {
  const bool sync = GetParam();
  const int trainers = sync ? 2 : 1;
  auto d = std::make_shared<DistPrograms>("127.0.0.1:0", trainers, sync);
  AddLrBlock(&d->pserver);
  ServingNet net(20000);
  Scope scope;
  Executor exe(CPUPlace(), net.options());
  ASSERT_TRUE(exe.Run(d->startup.desc(), &scope).ok());
  *scope.Var("lr_step")->GetMutable<Tensor>() = MakeTensor<float>({1}, {0});
  absl::Status result;
  std::thread server([&] { result = exe.Run(d->pserver, &scope).status(); });
  const std::string ep = net.WaitEndpoint();
  ASSERT_FALSE(ep.empty());
  std::vector<std::thread> ts;
  for (int t = 0; t < trainers; ++t) ts.emplace_back([&, t] { RunTrainer(ep, t, trainers, sync, 4); });
  for (auto& t : ts) t.join();
  server.join();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(TensorToVector<float>(scope.FindVar("lr_step")->Get<Tensor>())[0], 4.0f);
}

INSTANTIATE_TEST_SUITE_P(Modes, LrBlockTest, ::testing::Values(true, false));

}  // namespace
}  // namespace oar
