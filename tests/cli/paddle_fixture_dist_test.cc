// The Paddle-written fixtures (tests/testdata/paddle/) as 2 pservers × 2
// sync trainers, in one process (each pserver and trainer an Executor on its
// own thread, gRPC on loopback): the pservers start from Paddle's saved
// values (cli/pserver_params.h), each trainer trains on its half of every
// fixed batch, and the mean of the two trainers' losses — the loss of the
// whole batch, since every fixture's loss is a mean — equals the loss
// Paddle recorded on the whole batch, step for step, within 1e-5. Models
// with batch norm (its statistics are each trainer's own) must run.
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/pserver_params.h"
#include "common/base/status.h"
#include "common/framework/op_registry.h"
#include "gtest/gtest.h"
#include "pserver/pserver_ops.h"
#include "pserver/pserver_runtime.h"
#include "tests/common/paddle/paddle_fixture.h"
#include "tests/util/listen_socket.h"
#include "tests/util/trainer_net.h"
#include "trainer/dist_ops.h"
#include "transpiler/distribute_transpiler.h"

namespace oar {
namespace {

constexpr int kTrainers = 2, kPservers = 2;

struct TrainerRun {
  absl::Status status;
  std::vector<double> losses;
};

constexpr int kDeadlineMs = 60000;  // every call and barrier of the job

// Trainer `id`: its startup (which pulls the pservers' values), then each
// step on its half of the step's batch.
void RunTrainer(const paddle_fixture::Fixture& f, const std::vector<FeedMap>& batches, const ProgramDesc& startup,
                const ProgramDesc& main, int id, const std::vector<std::string>& eps, TrainerRun* out) {
  TrainerNet net(nullptr, {.deadline_ms = kDeadlineMs});
  Executor exe(CPUPlace(), net.options());
  Scope scope;
  out->status = net.client.WaitServerReady(eps, kDeadlineMs);
  if (!out->status.ok()) return;
  if (auto st = exe.Run(startup, &scope); !st.ok()) {
    out->status = Annotate(st.status(), "the startup program");
    return;
  }
  for (int step = 0; step < f.steps; ++step) {
    const FeedMap half = paddle_fixture::Share(batches[static_cast<size_t>(step % f.batches)], id, kTrainers);
    auto r = exe.Run(main, &scope, half, {f.loss});
    if (!r.ok()) {
      out->status = Annotate(r.status(), absl::StrCat("step ", step));
      return;
    }
    out->losses.push_back((*r)[0].data<float>()[0]);
  }
  out->status = exe.Close();
}

class PaddleFixtureDistTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PaddleFixtureDistTest, TwoByTwoSyncJobMakesPaddlesWholeBatchLosses) {
  OpRegistry::ExtendGlobal(RegisterPserverOps);
  OpRegistry::ExtendGlobal(RegisterDistOps);
  const std::string model = GetParam(), dir = paddle_fixture::kDir + model + "/";
  const paddle_fixture::Fixture f = paddle_fixture::Load(model);
  ASSERT_TRUE(f.main && f.startup);
  const std::vector<FeedMap> batches = paddle_fixture::LoadBatches(model, f);
  const std::string params = dir + "params";  // a directory, or one combined file
  std::vector<std::string> eps;
  for (int p = 0; p < kPservers; ++p) eps.push_back(ReservedEndpoint());
  std::vector<ProgramDesc> trainer(kTrainers), trainer_startup(kTrainers);
  std::vector<std::pair<ProgramDesc, ProgramDesc>> pserver(kPservers);
  std::vector<SplitParam> split;
  for (int t = 0; t < kTrainers; ++t) {
    DistributeTranspiler tr;
    ProgramDesc main = *f.main, startup = *f.startup;
    absl::Status s = tr.transpile(t, &main, absl::StrJoin(eps, ","), kTrainers, true, &startup);
    if (model == "bert") {  // ClipGradByGlobalNorm: refused, naming the op and what to do instead
      EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
      EXPECT_NE(s.message().find("squared_l2_norm: the program clips gradients by their global norm "
                                 "(ClipGradByGlobalNorm), which in pserver mode would clip each pserver's share"),
                std::string::npos)
          << s;
      return;
    }
    ASSERT_TRUE(s.ok()) << s;
    auto tp = tr.get_trainer_program(/*wait_port=*/false);
    ASSERT_TRUE(tp.ok()) << tp.status();
    trainer[t] = *tp;
    trainer_startup[t] = *tr.get_trainer_startup_program();
    for (int p = 0; p < kPservers && t == 0; ++p) {
      auto pair = tr.get_pserver_programs(eps[p]);
      ASSERT_TRUE(pair.ok()) << pair.status();
      pserver[p] = *pair;
      split = tr.split_params();
    }
  }
  std::vector<absl::Status> ps_status(kPservers);
  std::vector<TrainerRun> runs(kTrainers);
  std::vector<std::thread> threads;
  for (int p = 0; p < kPservers; ++p) {
    threads.emplace_back([&, p] {
      auto init = [&](Executor& exe, Scope* scope) {
        return cli::LoadPserverParams(exe, params, *f.main, pserver[p].first, split, scope).status();
      };
      ps_status[p] =
          RunPserver(pserver[p].first, pserver[p].second, {.init = init, .rpc = {.deadline_ms = kDeadlineMs}});
    });
  }
  for (int t = 0; t < kTrainers; ++t) {
    threads.emplace_back([&, t] { RunTrainer(f, batches, trainer_startup[t], trainer[t], t, eps, &runs[t]); });
  }
  for (auto& th : threads) th.join();
  for (int p = 0; p < kPservers; ++p) EXPECT_TRUE(ps_status[p].ok()) << "pserver " << p << ": " << ps_status[p];
  for (int t = 0; t < kTrainers; ++t) EXPECT_TRUE(runs[t].status.ok()) << "trainer " << t << ": " << runs[t].status;
  if (::testing::Test::HasFailure()) return;
  paddle_fixture::ExpectMeanLossesMatch(f, {runs[0].losses, runs[1].losses});
}

INSTANTIATE_TEST_SUITE_P(Models, PaddleFixtureDistTest,
                         ::testing::Values("mlp", "cnn", "embedding", "zoo", "probs", "adaptive", "axis", "resnet18",
                                           "bert", "wide_deep", "lstm", "gru", "word2vec_nce", "word2vec_hsigmoid",
                                           "fluid13_ctr_dnn", "fluid13_word2vec", "fluid15_ctr_dnn", "fluid15_word2vec",
                                           "fluid16_ctr_dnn", "fluid16_word2vec", "fluid18_ctr_dnn",
                                           "fluid18_word2vec"));

}  // namespace
}  // namespace oar
