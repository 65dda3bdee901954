// The Paddle-written fixtures (tests/testdata/paddle/) in nccl2 mode: two
// trainers (threads here, each its own scope and ParallelExecutor on one
// CPU place) all-reduce their gradients over the TCP ring on loopback, each
// from Paddle's saved values and on its half of every fixed batch. The mean
// of their losses — the whole batch's, every fixture's loss being a mean —
// equals the loss Paddle recorded on the whole batch within 1e-5, step for
// step. Models with batch norm (each trainer's own statistics) must run.
#include <cmath>
#include <thread>

#include "gtest/gtest.h"
#include "tests/common/paddle/paddle_fixture.h"
#include "tests/util/listen_socket.h"
#include "trainer/collective/tcp_ring.h"
#include "trainer/parallel_executor.h"
#include "trainer/places.h"

namespace oar {
namespace {

constexpr int kTrainers = 2;

struct TrainerRun {
  absl::Status status;
  std::vector<double> losses;
};

TrainerRun Train(const std::string& model, const paddle_fixture::Fixture& f, const std::vector<FeedMap>& batches,
                 int rank, Collective* c) {
  TrainerRun r;
  const std::string dir = paddle_fixture::kDir + model + "/";
  Executor exe;
  Scope scope;
  r.status = exe.Run(*f.startup, &scope).status();
  if (!r.status.ok()) return r;
  r.status = f.params == "dir" ? load_persistables(exe, &scope, dir + "params", *f.main)
                               : load_persistables(exe, &scope, dir, *f.main, "params");
  if (!r.status.ok()) return r;
  RunEnv env;
  auto pe = ParallelExecutor::Create(CpuPlaces(1), f.loss, *f.main, &scope, BuildStrategy{}, {}, kTrainers, rank,
                                     nullptr, &env, c);
  if (!pe.ok()) {
    r.status = pe.status();
    return r;
  }
  for (int step = 0; step < f.steps; ++step) {
    auto out =
        (*pe)->Run({f.loss}, paddle_fixture::Share(batches[static_cast<size_t>(step % f.batches)], rank, kTrainers));
    if (!out.ok()) {
      r.status = out.status();
      return r;
    }
    r.losses.push_back((*out)[0].data<float>()[0]);
  }
  return r;
}

class PaddleFixtureNccl2Test : public ::testing::TestWithParam<std::string> {};

TEST_P(PaddleFixtureNccl2Test, TwoTrainersMakePaddlesWholeBatchLosses) {
  const std::string model = GetParam();
  const paddle_fixture::Fixture f = paddle_fixture::Load(model);
  ASSERT_TRUE(f.main && f.startup);
  const std::vector<FeedMap> batches = paddle_fixture::LoadBatches(model, f);
  std::vector<std::string> eps;
  for (int t = 0; t < kTrainers; ++t) eps.push_back(ReservedEndpoint());
  std::vector<TrainerRun> runs(kTrainers);
  std::vector<std::thread> threads;
  for (int t = 0; t < kTrainers; ++t) {
    threads.emplace_back([&, t] {
      auto ring = TcpRing::Create({.rank = t, .endpoints = eps, .token = "fixture", .timeout = absl::Seconds(60)});
      if (!ring.ok()) {
        runs[t].status = ring.status();
        return;
      }
      runs[t] = Train(model, f, batches, t, ring->get());
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kTrainers; ++t) ASSERT_TRUE(runs[t].status.ok()) << "trainer " << t << ": " << runs[t].status;
  paddle_fixture::ExpectMeanLossesMatch(f, {runs[0].losses, runs[1].losses});
}

INSTANTIATE_TEST_SUITE_P(Models, PaddleFixtureNccl2Test,
                         ::testing::Values("mlp", "cnn", "embedding", "zoo", "probs", "adaptive", "axis", "resnet18",
                                           "bert", "wide_deep", "lstm", "gru", "word2vec_nce", "word2vec_hsigmoid",
                                           "fluid13_ctr_dnn", "fluid13_word2vec", "fluid15_ctr_dnn", "fluid15_word2vec",
                                           "fluid16_ctr_dnn", "fluid16_word2vec", "fluid18_ctr_dnn",
                                           "fluid18_word2vec"));

}  // namespace
}  // namespace oar
