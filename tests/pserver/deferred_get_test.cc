// A sync pserver's Gets that arrive before their step's optimize pass: over
// the stream transports they are parked and answered by the loop thread
// that ends the pass (ParameterServer::TryHandleDeferred), over gRPC they
// wait on a pool thread. Both must answer with the same parameters — the
// step's update of the averaged gradients — and a parked Get learns why its
// step never came (the barrier's timeout naming the missing trainer, or the
// pserver stopping).
#include <thread>

#include "common/rpc/rpc_client.h"
#include "gtest/gtest.h"
#include "tests/pserver/running_server.h"

namespace oar {
namespace {

constexpr char kW[] = "fc_0.w_0", kWGrad[] = "fc_0.w_0@GRAD", kB[] = "fc_0.b_0", kBGrad[] = "fc_0.b_0@GRAD";

class DeferredGetTest : public ::testing::TestWithParam<std::string> {};

// Trainer 0 pushes its step and asks for the parameters before trainer 1 has
// pushed: its Get is answered only after trainer 1's push, with
// w0 - 0.1 * (g0 + g1) / 2, on every transport.
TEST_P(DeferredGetTest, AGetBeforeTheStepIsAnsweredWithTheStepsUpdate) {
  RunningServer s(GetParam(), 20000);
  rpc::RpcClient c(s.transport.get(), rpc::ClientOptions{.deadline_ms = 10000, .retry_times = 0});
  Variable w0[2], b0[2];
  for (int t = 0; t < 2; ++t) {  // the initial pull
    ASSERT_TRUE(c.AsyncGetVar(s.ep, kW, &w0[t], t)->Wait().ok());
    ASSERT_TRUE(c.AsyncGetVar(s.ep, kB, &b0[t], t)->Wait().ok());
    ASSERT_TRUE(c.AsyncSendFetchBarrier(s.ep, t)->Wait().ok());
  }
  const std::vector<float> g0 = {0.5f, -1.25f, 2.0f, 0.125f}, g1 = {1.5f, 0.75f, -3.0f, 0.375f};
  Variable wg0 = Floats({4, 1}, g0), wg1 = Floats({4, 1}, g1), bg0 = Floats({1}, {0.25f}), bg1 = Floats({1}, {-0.75f});
  ASSERT_TRUE(c.AsyncSendVar(s.ep, kWGrad, &wg0, {.trainer_id = 0})->Wait().ok());
  ASSERT_TRUE(c.AsyncSendVar(s.ep, kBGrad, &bg0, {.trainer_id = 0})->Wait().ok());
  ASSERT_TRUE(c.AsyncSendBatchBarrier(s.ep, 0)->Wait().ok());
  Variable w1, b1;
  auto get_w = c.AsyncGetVar(s.ep, kW, &w1, 0);
  auto get_b = c.AsyncGetVar(s.ep, kB, &b1, 0);
  ASSERT_TRUE(c.AsyncSendVar(s.ep, kWGrad, &wg1, {.trainer_id = 1})->Wait().ok());
  ASSERT_TRUE(c.AsyncSendVar(s.ep, kBGrad, &bg1, {.trainer_id = 1})->Wait().ok());
  ASSERT_TRUE(c.AsyncSendBatchBarrier(s.ep, 1)->Wait().ok());
  ASSERT_TRUE(get_w->Wait().ok()) << get_w->Wait();
  ASSERT_TRUE(get_b->Wait().ok()) << get_b->Wait();

  const std::vector<float> w = Values(w0[0]);
  std::vector<float> want(w.size());
  for (size_t i = 0; i < w.size(); ++i) want[i] = w[i] - 0.1f * ((g0[i] + g1[i]) * 0.5f);
  EXPECT_EQ(Values(w1), want);
  EXPECT_EQ(Values(b1), std::vector<float>{Values(b0[0])[0] - 0.1f * ((0.25f + -0.75f) * 0.5f)});
  // Trainer 1's Get, now after the pass, sees the same step.
  Variable w1_of_1;
  ASSERT_TRUE(c.AsyncGetVar(s.ep, kW, &w1_of_1, 1)->Wait().ok());
  EXPECT_EQ(Values(w1_of_1), want);
  EXPECT_EQ(s.ps->stats().steps, 1);
}

// Trainer 1 never pushes: trainer 0's early Get is answered with the
// barrier's timeout, which names trainer 1, well before the client's own
// deadline.
TEST_P(DeferredGetTest, AGetWhoseStepNeverComesLearnsWhichTrainerIsMissing) {
  RunningServer s(GetParam(), 400);
  rpc::RpcClient c(s.transport.get(), rpc::ClientOptions{.deadline_ms = 30000, .retry_times = 0});
  Variable w;
  for (int t = 0; t < 2; ++t) ASSERT_TRUE(c.AsyncSendFetchBarrier(s.ep, t)->Wait().ok());
  ASSERT_TRUE(c.AsyncSendBatchBarrier(s.ep, 0)->Wait().ok());
  absl::Status got = c.AsyncGetVar(s.ep, kW, &w, 0)->Wait();
  EXPECT_EQ(got.code(), absl::StatusCode::kDeadlineExceeded) << got;
  EXPECT_NE(got.message().find("trainer(s) 1 never arrived"), std::string::npos) << got;
  s.loop.join();
  s.loop = std::thread([] {});
  EXPECT_EQ(s.result.code(), absl::StatusCode::kDeadlineExceeded) << s.result;
}

// Stopping the pserver answers a Get that waits for its step.
TEST_P(DeferredGetTest, StopAnswersAWaitingGet) {
  RunningServer s(GetParam(), 20000);
  rpc::RpcClient c(s.transport.get(), rpc::ClientOptions{.deadline_ms = 30000, .retry_times = 0});
  ASSERT_TRUE(c.AsyncSendBatchBarrier(s.ep, 0)->Wait().ok());
  Variable w;
  auto get = c.AsyncGetVar(s.ep, kW, &w, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let it reach the pserver
  s.ps->Stop();
  absl::Status got = get->Wait();
  EXPECT_FALSE(got.ok());
  EXPECT_NE(got.message().find("shutting down"), std::string::npos) << got;
}

INSTANTIATE_TEST_SUITE_P(Transports, DeferredGetTest, ::testing::Values("grpc", "tcp", "shm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace oar
