// The communicator (async and half-async pserver training, Fluid 1.5+)
// through the user's path: JobModel's network transpiled with
// sync_mode=false and runtime_split_send_recv (or half_async) for 2
// pservers, the pservers run as ParameterServers on the in-process
// transport, the trainer's programs run by Executors whose RunEnv carries
// the communicator. Each test checks values: the pservers' final parameters
// against a reference that applies the same merged updates in one process.
#include "trainer/communicator.h"

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/util/ps_job.h"

namespace oar {
namespace {

constexpr float kLr = 0.01f;  // JobModel's SGD
const std::vector<std::string> kGrads = {"b1@GRAD", "b2@GRAD", "w1@GRAD", "w2@GRAD"};

std::string ParamOf(const std::string& grad) { return grad.substr(0, grad.find('@')); }

std::map<std::string, std::vector<float>> Params(const Scope& scope) {
  std::map<std::string, std::vector<float>> m;
  for (const auto& g : kGrads) m[ParamOf(g)] = TensorToVector<float>(scope.FindVar(ParamOf(g))->Get<Tensor>());
  return m;
}

void ExpectNear(const std::map<std::string, std::vector<float>>& got,
                const std::map<std::string, std::vector<float>>& want, float tol) {
  for (const auto& [name, w] : want) {
    const auto& g = got.at(name);
    ASSERT_EQ(g.size(), w.size()) << name;
    for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(g[i], w[i], tol) << name << "[" << i << "]";
  }
}

// The pservers' parameters once SGD applied each merged gradient once: the
// initial ones minus the rate times every merged gradient; and how many
// queued values each variable's sends merged. OnMerged is the
// communicator's hook (called from its send threads).
struct MergedSgd {
  explicit MergedSgd(const Scope& scope) : want(Params(scope)) {}
  std::function<void(const std::string&, const Variable&, int)> OnMerged() {
    return [this](const std::string& var, const Variable& merged, int values) {
      const std::vector<float> g = TensorToVector<float>(merged.Get<Tensor>());
      absl::MutexLock l(&mu);
      values_merged[var] += values;
      auto& p = want[ParamOf(var)];
      for (size_t i = 0; i < p.size(); ++i) p[i] -= kLr * g[i];
    };
  }
  absl::Mutex mu;
  std::map<std::string, std::vector<float>> want;
  std::map<std::string, int> values_merged;
};

// Ten steps' gradients queued before the sender starts, at most 4 merged:
// the pservers receive them as 4 + 4 + 2, summed (SGD) or averaged, and
// apply each merged gradient once.
class MergedSendsTest : public ::testing::TestWithParam<bool> {};

TEST_P(MergedSendsTest, QueuedGradientsReachThePserversMergedFourAtATime) {
  const bool sum = GetParam();
  PserverJob job(DistributeTranspilerConfig::AsyncStrategy(), 1);
  TrainerSide trainer(job);
  ASSERT_TRUE(trainer.exe.Run(job.trainer_startup[0], &trainer.scope).ok());
  auto& [client, env, exe, scope] = trainer;
  const auto initial = Params(scope);
  std::map<std::string, std::vector<int>> merged_counts;
  absl::Mutex mu;
  auto comm = Communicator::Create(job.trainer[0], &client,
                                   {.max_merge_var_num = 4,
                                    .send_wait_times = 0,
                                    .is_sgd_optimizer = sum,
                                    .on_merged = [&](const std::string& var, const Variable&, int values) {
                                      absl::MutexLock l(&mu);
                                      merged_counts[var].push_back(values);
                                    }});
  ASSERT_TRUE(comm.ok()) << comm.status();
  env.communicator = comm->get();
  // Every step's gradient, fetched beside the loss (the parameters do not
  // move until the sender starts: nothing is pulled before).
  std::vector<std::map<std::string, std::vector<float>>> grads;
  std::vector<std::string> fetch = {job.loss};
  fetch.insert(fetch.end(), kGrads.begin(), kGrads.end());
  for (int step = 0; step < 10; ++step) {
    auto r = exe.Run(job.trainer[0], &scope, JobBatch(step, 0, 8), fetch);
    ASSERT_TRUE(r.ok()) << r.status();
    grads.emplace_back();
    for (size_t k = 0; k < kGrads.size(); ++k) grads.back()[kGrads[k]] = TensorToVector<float>((*r)[k + 1]);
  }
  EXPECT_EQ(Params(scope), initial);
  (*comm)->Start(&scope);
  ASSERT_TRUE((*comm)->Stop().ok());
  ASSERT_TRUE((*comm)->InstallReceived(&scope).ok());
  env.communicator = nullptr;
  ASSERT_TRUE(exe.Close().ok());
  for (const auto& g : kGrads) EXPECT_EQ(merged_counts[g], (std::vector<int>{4, 4, 2})) << g;
  // The reference: each group of steps' gradients merged, applied by SGD.
  auto want = initial;
  for (const auto& [first, last] : std::vector<std::pair<int, int>>{{0, 4}, {4, 8}, {8, 10}}) {
    for (const auto& g : kGrads) {
      auto& p = want[ParamOf(g)];
      for (size_t i = 0; i < p.size(); ++i) {
        float merged = 0;
        for (int s = first; s < last; ++s) merged += grads[static_cast<size_t>(s)][g][i];
        if (!sum) merged /= static_cast<float>(last - first);
        p[i] -= kLr * merged;
      }
    }
  }
  ExpectNear(Params(scope), want, 1e-5f);
  for (const auto& r : job.results) EXPECT_TRUE(r.ok()) << r;
}

INSTANTIATE_TEST_SUITE_P(SumOrMean, MergedSendsTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Sum" : "Mean"; });

// Training with the sender and the recv thread live: whatever the timing
// merged and pulled, the pservers' parameters are the initial ones minus
// the learning rate times every merged gradient sent (SGD is linear), and
// no step's gradient is lost.
TEST(CommunicatorTest, LiveAsyncTrainingAppliesEveryMergedGradientOnce) {
  PserverJob job(DistributeTranspilerConfig::AsyncStrategy(), 1);
  TrainerSide trainer(job);
  ASSERT_TRUE(trainer.exe.Run(job.trainer_startup[0], &trainer.scope).ok());
  auto& [client, env, exe, scope] = trainer;
  MergedSgd sgd(scope);
  auto comm = Communicator::Create(job.trainer[0], &client,
                                   {.max_merge_var_num = 3,
                                    .min_send_grad_num_before_recv = 2,
                                    .is_sgd_optimizer = false,  // means: steady steps whatever the timing merged
                                    .on_merged = sgd.OnMerged()});
  ASSERT_TRUE(comm.ok()) << comm.status();
  env.communicator = comm->get();
  (*comm)->Start(&scope);
  constexpr int kSteps = 40;
  std::vector<float> losses;
  for (int step = 0; step < kSteps; ++step) {
    auto r = exe.Run(job.trainer[0], &scope, JobBatch(step % 5, 0, 8), {job.loss});
    ASSERT_TRUE(r.ok()) << r.status();
    losses.push_back(TensorToVector<float>((*r)[0])[0]);
  }
  ASSERT_TRUE((*comm)->Stop().ok());
  ASSERT_TRUE((*comm)->InstallReceived(&scope).ok());
  EXPECT_GT((*comm)->counts().pulls, 1);
  env.communicator = nullptr;
  ASSERT_TRUE(exe.Close().ok());
  for (const auto& g : kGrads) EXPECT_EQ(sgd.values_merged[g], kSteps) << g;
  ExpectNear(Params(scope), sgd.want, 1e-4f);
  for (float l : losses) EXPECT_TRUE(std::isfinite(l));
  for (const auto& r : job.results) EXPECT_TRUE(r.ok()) << r;
}

// Half-async with two threads of one trainer, each on half of every global
// batch: they meet at the send_barrier, their gradients are averaged and
// applied, and the parameters pulled while they wait — so the run is the
// single process's SGD on the whole batch, step for step.
TEST(CommunicatorTest, HalfAsyncThreadsMakeTheSingleProcessSteps) {
  constexpr int kSteps = 6;
  constexpr int kThreads = 2;
  PserverJob job(DistributeTranspilerConfig::HalfAsyncStrategy(), 1);
  rpc::RpcClient client(&job.transport, {.deadline_ms = 20000});
  RunEnv env = rpc::ClientEnv(&client);
  Scope root;
  ASSERT_TRUE(Executor(CPUPlace(), ExecutorOptions{.env = &env}).Run(job.trainer_startup[0], &root).ok());
  // The reference: one process from the values the pservers start from
  // (their startup programs draw each block's values for themselves).
  std::map<std::string, std::vector<float>> want;
  {
    JobModel ref("sgd");
    Executor exe;
    Scope scope;
    ASSERT_TRUE(exe.Run(ref.startup.desc(), &scope).ok());
    for (const auto& [name, values] : Params(root)) {
      Tensor* p = scope.FindVar(name)->GetMutable<Tensor>();
      std::copy(values.begin(), values.end(), p->data<float>());
    }
    for (int step = 0; step < kSteps; ++step) {
      ASSERT_TRUE(exe.Run(ref.main.desc(), &scope, JobBatch(step, 0, 8), {ref.loss.name()}).ok());
    }
    want = Params(scope);
  }
  auto comm = Communicator::Create(job.trainer[0], &client, {.half_async = true});
  ASSERT_TRUE(comm.ok()) << comm.status();
  env.communicator = comm->get();
  (*comm)->SetThreads(kThreads);
  (*comm)->Start(&root);
  absl::Status status[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // As an AsyncExecutor thread: the parameters in the shared root, the
      // rest in a scope of its own.
      Executor exe(CPUPlace(), ExecutorOptions{.env = &env});
      Scope& mine = root.NewScope();
      auto block = exe.Prepare(job.trainer[0], 0);
      status[t] = block.status();
      if (status[t].ok()) status[t] = (*block)->Bind(&root, &mine);
      for (int step = 0; step < kSteps && status[t].ok(); ++step) {
        for (auto& [name, value] : JobBatch(step, 8 / kThreads * t, 8 / kThreads * (t + 1)))
          *mine.Var(name)->GetMutable<Tensor>() = value;
        status[t] = (*block)->Run();
      }
      if (block.ok()) (*block)->Unbind();
      (*comm)->ThreadDone();
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& s : status) ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE((*comm)->Flush().ok());  // every round went at its Barrier (an elastic chunk's end)
  ASSERT_TRUE((*comm)->Stop().ok());
  ASSERT_TRUE((*comm)->InstallReceived(&root).ok());
  env.communicator = nullptr;
  ASSERT_TRUE(Executor(CPUPlace(), ExecutorOptions{.env = &env}).Close().ok());
  ExpectNear(Params(root), want, 1e-5f);
  for (const auto& r : job.results) EXPECT_TRUE(r.ok()) << r;
}

// A queue that stays full makes the send op wait, then fail naming the
// variable, its queue's size and Fluid's flag.
TEST(CommunicatorTest, AFullQueueFailsTheSendAfterItsBoundNamingTheVariable) {
  PserverJob job(DistributeTranspilerConfig::AsyncStrategy(), 1);
  rpc::RpcClient client(&job.transport, {.deadline_ms = 20000});
  auto comm =
      Communicator::Create(job.trainer[0], &client, {.send_queue_size = 1, .queue_wait = absl::Milliseconds(50)});
  ASSERT_TRUE(comm.ok()) << comm.status();
  Variable g;
  *g.GetMutable<Tensor>() = MakeTensor<float>({1}, {1.0f});
  EXPECT_TRUE((*comm)->Send("b2@GRAD", g).ok());
  const absl::Status s = (*comm)->Send("b2@GRAD", g);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("'b2@GRAD'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("FLAGS_communicator_send_queue_size"), std::string::npos) << s;
  EXPECT_EQ((*comm)->Send("nope@GRAD", g).code(), absl::StatusCode::kInvalidArgument);
  // The pservers were never told anything: end them.
  job.Stop();
}

// An is_sparse embedding sliced over both pservers, under the Async
// strategy (runtime_split_send_recv: no split op in the program): each
// merged SelectedRows gradient is cut by the blocks' row ranges as it is
// sent, each block's rows renumbered from its first. The pservers' table
// is then the initial one minus the rate times every merged gradient, row
// by row (SGD is linear), which the final pull brings back.
TEST(CommunicatorTest, ASlicedSparseTablesMergedGradientsAreCutByTheBlocksRows) {
  constexpr float kSparseLr = 0.5f;
  PserverJob job(DistributeTranspilerConfig::AsyncStrategy(), 1, SparseEmbeddingNet(kSparseLr));
  auto contexts = ContextsOf(job.trainer[0]);
  ASSERT_TRUE(contexts.ok()) << contexts.status();
  ASSERT_EQ(contexts->send.at("emb@GRAD").sections, (std::vector<int64_t>{2048, 2048}));
  TrainerSide trainer(job);
  ASSERT_TRUE(trainer.exe.Run(job.trainer_startup[0], &trainer.scope).ok());
  auto& [client, env, exe, scope] = trainer;
  auto want = TensorToVector<float>(scope.FindVar("emb")->Get<Tensor>());
  std::vector<int> merged_counts;
  std::set<int64_t> rows_sent;
  absl::Mutex mu;
  auto comm = Communicator::Create(job.trainer[0], &client,
                                   {.max_merge_var_num = 4,
                                    .send_wait_times = 0,
                                    .is_sgd_optimizer = true,
                                    .on_merged = [&](const std::string& var, const Variable& merged, int values) {
                                      if (var != "emb@GRAD") return;
                                      absl::MutexLock l(&mu);
                                      merged_counts.push_back(values);
                                      const SelectedRows& sr = merged.Get<SelectedRows>();
                                      const auto v = TensorToVector<float>(sr.value);
                                      for (size_t k = 0; k < sr.rows.size(); ++k) {
                                        rows_sent.insert(sr.rows[k]);
                                        for (size_t j = 0; j < 8; ++j) {
                                          want[static_cast<size_t>(sr.rows[k]) * 8 + j] -= kSparseLr * v[k * 8 + j];
                                        }
                                      }
                                    }});
  ASSERT_TRUE(comm.ok()) << comm.status();
  env.communicator = comm->get();
  for (int step = 0; step < 10; ++step) {
    std::vector<int64_t> ids;
    std::vector<float> ys;
    for (int i = 0; i < 4; ++i) {
      ids.push_back((step * 997 + i * 1031) % 4096);  // rows of both blocks, some again in later steps
      ys.push_back(0.1f * static_cast<float>(i));
    }
    auto r = exe.Run(job.trainer[0], &scope,
                     {{"ids", MakeTensor<int64_t>({4, 1}, ids)}, {"y", MakeTensor<float>({4, 1}, ys)}}, {job.loss});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  (*comm)->Start(&scope);
  ASSERT_TRUE((*comm)->Stop().ok());
  ASSERT_TRUE((*comm)->InstallReceived(&scope).ok());
  env.communicator = nullptr;
  ASSERT_TRUE(exe.Close().ok());
  EXPECT_EQ(merged_counts, (std::vector<int>{4, 4, 2}));
  ASSERT_FALSE(rows_sent.empty());
  EXPECT_LT(*rows_sent.begin(), 2048);  // both blocks had rows to take
  EXPECT_GE(*rows_sent.rbegin(), 2048);
  const auto got = TensorToVector<float>(scope.FindVar("emb")->Get<Tensor>());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << "emb[" << i << "]";
  for (const auto& r : job.results) EXPECT_TRUE(r.ok()) << r;
}

// What an elastic trainer does before it reports a chunk done: Flush
// returns once every value queued before it was merged, sent and applied,
// although the sender would otherwise wait 3 s for more values to merge.
// The pservers then hold the initial parameters minus the rate times
// every merged gradient (SGD, summed), read back with plain Gets.
TEST(CommunicatorTest, FlushReturnsOnceThePserversAppliedEveryQueuedGradient) {
  PserverJob job(DistributeTranspilerConfig::AsyncStrategy(), 1);
  TrainerSide trainer(job);
  ASSERT_TRUE(trainer.exe.Run(job.trainer_startup[0], &trainer.scope).ok());
  auto& [client, env, exe, scope] = trainer;
  MergedSgd sgd(scope);
  auto comm = Communicator::Create(job.trainer[0], &client,
                                   {.max_merge_var_num = 8,
                                    .send_wait_times = 300,
                                    .independent_recv_thread = false,
                                    .is_sgd_optimizer = true,
                                    .on_merged = sgd.OnMerged()});
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_TRUE((*comm)->Flush().ok());  // nothing queued: at once
  env.communicator = comm->get();
  (*comm)->Start(&scope);
  for (int step = 0; step < 5; ++step) {
    auto r = exe.Run(job.trainer[0], &scope, JobBatch(step, 0, 8), {job.loss});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  ASSERT_TRUE((*comm)->Flush().ok());
  {
    absl::MutexLock l(&sgd.mu);
    for (const auto& g : kGrads) EXPECT_EQ(sgd.values_merged[g], 5) << g;
  }
  auto contexts = ContextsOf(job.trainer[0]);
  ASSERT_TRUE(contexts.ok()) << contexts.status();
  for (const auto& [param, values] : sgd.want) {
    const VarContext& c = contexts->recv.at(param);
    std::vector<float> on_pservers;
    for (size_t i = 0; i < c.blocks.size(); ++i) {
      Variable got;
      ASSERT_TRUE(rpc::WaitAll({client.AsyncGetVar(c.epmap[i], c.blocks[i], &got, 0)}).ok()) << c.blocks[i];
      const std::vector<float> block = TensorToVector<float>(got.Get<Tensor>());
      on_pservers.insert(on_pservers.end(), block.begin(), block.end());
    }
    ASSERT_EQ(on_pservers.size(), values.size()) << param;
    for (size_t i = 0; i < values.size(); ++i) ASSERT_NEAR(on_pservers[i], values[i], 1e-5) << param << "[" << i << "]";
  }
  ASSERT_TRUE((*comm)->Stop().ok());
  env.communicator = nullptr;
  ASSERT_TRUE(exe.Close().ok());
  for (const auto& r : job.results) EXPECT_TRUE(r.ok()) << r;
}

TEST(CommunicatorTest, FlushNeedsTheSendThread) {
  PserverJob job(DistributeTranspilerConfig::AsyncStrategy(), 1);
  TrainerSide trainer(job);
  ASSERT_TRUE(trainer.exe.Run(job.trainer_startup[0], &trainer.scope).ok());
  auto plain = Communicator::Create(job.trainer[0], &trainer.client, {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  Variable g;
  *g.GetMutable<Tensor>() = MakeTensor<float>({2}, {1, 2});
  ASSERT_TRUE((*plain)->Send("b2@GRAD", g).ok());
  const absl::Status s = (*plain)->Flush();  // queued, never started
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("1 queued value(s) and no send thread"), std::string::npos) << s;
  ASSERT_TRUE(trainer.exe.Close().ok());
}

TEST(CommunicatorTest, ContextsFollowTheSendAndRecvOps) {
  PserverJob job(DistributeTranspilerConfig::AsyncStrategy(), 1);
  auto c = ContextsOf(job.trainer[0]);
  ASSERT_TRUE(c.ok()) << c.status();
  const VarContext& w1 = c->send.at("w1@GRAD");
  EXPECT_EQ(w1.blocks, (std::vector<std::string>{"w1@GRAD.block0", "w1@GRAD.block1"}));
  EXPECT_EQ(w1.sections, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(w1.epmap, job.eps);
  EXPECT_EQ(c->recv.at("w1").blocks, (std::vector<std::string>{"w1.block0", "w1.block1"}));
  EXPECT_TRUE(c->send.at("b2@GRAD").sections.empty());
  EXPECT_EQ(c->send.size(), 4u);
  EXPECT_EQ(c->recv.size(), 4u);
  job.Stop();
}

}  // namespace
}  // namespace oar
