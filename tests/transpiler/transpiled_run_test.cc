// A transpiled 2 pservers × 2 trainers program set, run in-process — each
// pserver and trainer an Executor on its own thread, talking gRPC on
// loopback — against the single-process program on the same global batches:
// the mean of the trainers' losses equals the single-process loss within
// 1e-5 at every step, and the final parameters agree.
#include <cmath>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "common/framework/executor.h"
#include "common/framework/op_registry.h"
#include "common/framework/tensor.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_common.h"
#include "gtest/gtest.h"
#include "pserver/pserver_ops.h"
#include "tests/transpiler/fc_net.h"
#include "tests/util/listen_socket.h"
#include "tests/util/serving_net.h"
#include "tests/util/trainer_net.h"
#include "trainer/dist_ops.h"

namespace oar {
namespace {

constexpr int kSteps = 10;
constexpr int kBatch = 8;

// x[128] → fc(128, relu) "w1"/"b1" (16384 weights: two blocks) → fc(1)
// "w2"/"b2" → square error → mean; or, for "sparse", int64 ids → a sparse
// embedding "emb" [4096, 8] (two blocks) → fc(1) → square error → mean.
struct MlpNet {
  UniqueNameGuard names;
  Program main, startup;
  Var loss;
  std::vector<std::string> params = {"b1", "b2", "w1", "w2"};
  explicit MlpNet(const std::string& opt) {
    startup.set_random_seed(11);  // the same initial values every run
    ProgramGuard g(&main, &startup);
    auto attr = [](const char* n) {
      ParamAttr a;
      a.name = n;
      return a;
    };
    if (opt == "sparse") {
      params = {"b2", "emb", "w2"};
      Var ids = layers::data("x", {1}, DataType::kInt64);
      Var emb = layers::embedding(ids, {4096, 8}, /*is_sparse=*/true, false, -1, attr("emb"));
      loss = layers::mean(
          layers::square_error_cost(layers::fc(emb, 1, "", attr("w2"), attr("b2")), layers::data("y", {1})));
      optimizer::SGD(0.5f).minimize(loss);
      EXPECT_TRUE(main.status().ok()) << main.status();
      return;
    }
    Var x = layers::data("x", {128});
    Var h = layers::fc(x, 128, "relu", attr("w1"), attr("b1"));
    Var pred = layers::fc(h, 1, "", attr("w2"), attr("b2"));
    loss = layers::mean(layers::square_error_cost(pred, layers::data("y", {1})));
    if (opt == "adam") {
      optimizer::Adam(0.002f).minimize(loss);
    } else {
      optimizer::SGD sgd(0);
      sgd.set_learning_rate(layers::exponential_decay(0.01f, 3, 0.5f, true));
      sgd.minimize(loss);
    }
    EXPECT_TRUE(main.status().ok()) << main.status();
  }
};

FeedMap Batch(const std::string& opt, int step, int begin, int end) {
  if (opt == "sparse") {  // ids that repeat within and across the trainers' halves
    std::vector<int64_t> ids;
    std::vector<float> ys;
    for (int i = begin; i < end; ++i) {
      ids.push_back((i * 997) % 4096 / (i % 3 == 0 ? 4096 : 1));  // the same every step
      ys.push_back(std::cos(0.3f * static_cast<float>(ids.back())));
    }
    const int64_t n = end - begin;
    return {{"x", MakeTensor<int64_t>({n, 1}, ids)}, {"y", MakeTensor<float>({n, 1}, ys)}};
  }
  std::vector<float> xs, ys;
  for (int i = begin; i < end; ++i) {
    float target = 0.1f;
    for (int k = 0; k < 128; ++k) {
      const float v = std::sin(0.37f * (i + 1) + 0.11f * k + 0.01f * step);
      xs.push_back(v);
      target += (k % 7 == 0 ? 0.2f : 0.0f) * v;
    }
    ys.push_back(target);
  }
  const int64_t n = end - begin;
  return {{"x", MakeTensor<float>({n, 128}, xs)}, {"y", MakeTensor<float>({n, 1}, ys)}};
}

struct TrainerResult {
  absl::Status status;
  std::vector<float> losses;
  std::map<std::string, std::vector<float>> initial, final;
};

constexpr int kDeadlineMs = 30000;  // every call and barrier of the job

void RunTrainer(const ProgramDesc& startup, const ProgramDesc& main, const std::string& loss,
                const std::vector<std::string>& param_names, const std::string& opt, int id, TrainerResult* out,
                const std::vector<std::string>& pservers) {
  TrainerNet net(nullptr, {.deadline_ms = kDeadlineMs});
  Executor exe(CPUPlace(), net.options());
  Scope scope;
  out->status = net.client.WaitServerReady(pservers, kDeadlineMs);
  if (!out->status.ok()) return;
  auto params = [&] {
    std::map<std::string, std::vector<float>> m;
    for (const auto& p : param_names) m[p] = TensorToVector<float>(scope.FindVar(p)->Get<Tensor>());
    return m;
  };
  auto st = exe.Run(startup, &scope);
  if (!st.ok()) {
    out->status = st.status();
    return;
  }
  out->initial = params();
  const int half = kBatch / 2;
  for (int s = 0; s < kSteps; ++s) {
    auto r = exe.Run(main, &scope, Batch(opt, s, id * half, (id + 1) * half), {loss});
    if (!r.ok()) {
      out->status = r.status();
      return;
    }
    out->losses.push_back(TensorToVector<float>((*r)[0])[0]);
  }
  out->final = params();
  // As a trainer process does: Executor::Close() says COMPLETE to every
  // pserver this trainer's client called.
  out->status = exe.Close();
}

void CheckAgainstSingleProcess(const std::string& opt, DistributeTranspilerConfig config = {}, int pservers = 2) {
  OpRegistry::ExtendGlobal(RegisterPserverOps);
  OpRegistry::ExtendGlobal(RegisterDistOps);
  std::vector<TrainerResult> results;
  std::string loss;
  std::vector<std::string> param_names;
  std::vector<absl::Status> ps_status;
  {  // the endpoints listen already (ReservedEndpoint): no port can be taken first
    std::vector<std::string> eps;
    for (int p = 0; p < pservers; ++p) eps.push_back(ReservedEndpoint());
    const std::string ep_list = absl::StrJoin(eps, ",");
    // Every process transpiles the same model the same way.
    std::vector<ProgramDesc> trainer(2), trainer_startup(2), pserver(pservers), pserver_startup(pservers);
    for (int t = 0; t < 2; ++t) {
      MlpNet net(opt);
      loss = net.loss.name();
      param_names = net.params;
      DistributeTranspiler tr(config);
      ASSERT_TRUE(tr.transpile(t, &net.main, ep_list, 2, true, &net.startup).ok());  // the Program overload
      trainer[t] = *tr.get_trainer_program(/*wait_port=*/false);
      trainer_startup[t] = *tr.get_trainer_startup_program();
      for (int p = 0; p < pservers && t == 0; ++p) {
        auto pair = tr.get_pserver_programs(eps[p]);
        ASSERT_TRUE(pair.ok()) << pair.status();
        std::tie(pserver[p], pserver_startup[p]) = *pair;
      }
    }
    ps_status.assign(pservers, absl::OkStatus());
    std::vector<std::thread> threads;
    for (int p = 0; p < pservers; ++p) {
      threads.emplace_back([&, p] {
        ServingNet net(kDeadlineMs);
        Executor exe(CPUPlace(), net.options());
        Scope scope;
        auto s = exe.Run(pserver_startup[p], &scope);
        ps_status[p] = s.ok() ? exe.Run(pserver[p], &scope).status() : s.status();
      });
    }
    results.assign(2, TrainerResult{});
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back(
          [&, t] { RunTrainer(trainer_startup[t], trainer[t], loss, param_names, opt, t, &results[t], eps); });
    }
    for (auto& th : threads) th.join();
  }
  for (int p = 0; p < pservers; ++p) ASSERT_TRUE(ps_status[p].ok()) << "pserver " << p << ": " << ps_status[p];
  for (int t = 0; t < 2; ++t) ASSERT_TRUE(results[t].status.ok()) << "trainer " << t << ": " << results[t].status;
  EXPECT_EQ(results[0].initial, results[1].initial);  // both pulled the pservers' values

  // The single process, from the same initial parameters.
  MlpNet ref(opt);
  Executor exe;
  Scope scope;
  ASSERT_TRUE(exe.Run(ref.startup.desc(), &scope).ok());
  for (const auto& [name, values] : results[0].initial) {
    Tensor* t = scope.FindVar(name)->GetMutable<Tensor>();
    ASSERT_EQ(static_cast<size_t>(t->numel()), values.size()) << name;
    std::copy(values.begin(), values.end(), t->data<float>());
  }
  std::vector<float> want;
  for (int s = 0; s < kSteps; ++s) {
    auto r = exe.Run(ref.main.desc(), &scope, Batch(opt, s, 0, kBatch), {ref.loss.name()});
    ASSERT_TRUE(r.ok()) << r.status();
    want.push_back(TensorToVector<float>((*r)[0])[0]);
    EXPECT_NEAR((results[0].losses[s] + results[1].losses[s]) / 2, want.back(), 1e-5) << "step " << s;
  }
  EXPECT_LT(want.back(), 0.9f * want.front());  // it trains: the comparison is not of a flat line
  for (const auto& p : param_names) {
    const auto want = TensorToVector<float>(scope.FindVar(p)->Get<Tensor>());
    const auto& got = results[0].final.at(p);
    ASSERT_EQ(got.size(), want.size()) << p;
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << p << "[" << i << "]";
    EXPECT_EQ(results[1].final.at(p), got) << p;
  }
}

TEST(TranspiledRunTest, SgdWithLrDecayMatchesSingleProcess) { CheckAgainstSingleProcess("sgd"); }

TEST(TranspiledRunTest, AdamMatchesSingleProcess) { CheckAgainstSingleProcess("adam"); }

// The embedding's sparse gradient is cut by split_selected_rows; each
// pserver merges the trainers' rows with sum (SelectedRows) and scale.
TEST(TranspiledRunTest, SparseEmbeddingMatchesSingleProcess) { CheckAgainstSingleProcess("sparse"); }

// Four variables kept whole on five pservers: the fifth owns nothing and
// only runs the LR-decay block.
TEST(TranspiledRunTest, IdlePserverAndWholeVariablesMatchSingleProcess) {
  DistributeTranspilerConfig c;
  c.slice_var_up = false;
  CheckAgainstSingleProcess("sgd", c, 5);
}

TEST(TranspiledRunTest, RuntimeSplitMatchesSingleProcess) {
  DistributeTranspilerConfig c;
  c.runtime_split_send_recv = true;
  CheckAgainstSingleProcess("adam", c);
}

// Fluid 1.6+'s runtime split of a sliced sparse table: no split op; the
// send op cuts the embedding's SelectedRows gradient into its blocks' row
// ranges as it sends them.
TEST(TranspiledRunTest, RuntimeSplitOfASparseEmbeddingMatchesSingleProcess) {
  DistributeTranspilerConfig c;
  c.runtime_split_send_recv = true;
  CheckAgainstSingleProcess("sparse", c);
}

}  // namespace
}  // namespace oar
