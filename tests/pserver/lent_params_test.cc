// A sync pserver lends its parameters to the trainers on its host: over shm
// a Get that allows it (RpcClient::AsyncGetView, a recv op's slices) reads
// the value where the pserver keeps it, through a read-only view; a plain
// Get still copies. The view holds its value until the trainer's next
// gradient, and when a trainer completes, the parameters move back into
// private memory, so what it last read stays as it was while the others
// train on (ParameterServer::UnlendIfDue).
#include <string>
#include <vector>

#include "common/rpc/rpc_client.h"
#include "gtest/gtest.h"
#include "tests/pserver/running_server.h"

namespace oar {
namespace {

constexpr char kW[] = "fc_0.w_0", kWGrad[] = "fc_0.w_0@GRAD", kBGrad[] = "fc_0.b_0@GRAD";

// Trainer `t`'s part of a step: its gradients (`g` for w, 1 for b), its
// batch barrier.
void Push(rpc::RpcClient& c, const RunningServer& s, int t, const std::vector<float>& g) {
  Variable w = Floats({4, 1}, g), b = Floats({1}, {1.0f});
  ASSERT_TRUE(c.AsyncSendVar(s.ep, kWGrad, &w, {.trainer_id = t})->Wait().ok());
  ASSERT_TRUE(c.AsyncSendVar(s.ep, kBGrad, &b, {.trainer_id = t})->Wait().ok());
  ASSERT_TRUE(c.AsyncSendBatchBarrier(s.ep, t)->Wait().ok());
}

// w after one SGD step (lr 0.1) on the gradients received, summed and
// scaled by 1/2 (the pserver program's scale op: 1 / its 2 trainers, also
// when one of them has completed).
std::vector<float> Stepped(const std::vector<float>& w, const std::vector<std::vector<float>>& grads) {
  std::vector<float> out(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    float sum = 0;
    for (const auto& g : grads) sum += g[i];
    out[i] = w[i] - 0.1f * (sum * 0.5f);
  }
  return out;
}

TEST(LentParamsTest, OverShmAViewGetReadsTheLentValueInPlaceAndAPlainGetCopies) {
  RunningServer s("shm", 20000);
  rpc::RpcClient c(s.transport.get(), rpc::ClientOptions{.deadline_ms = 10000, .retry_times = 0});
  Variable view, copy;
  ASSERT_TRUE(c.AsyncGetView(s.ep, kW, &view, 0)->Wait().ok());
  ASSERT_TRUE(c.AsyncGetVar(s.ep, kW, &copy, 1)->Wait().ok());
  const Tensor& v = view.Get<Tensor>();
  EXPECT_TRUE(v.OverForeignMemory());
  EXPECT_FALSE(v.Writable());
  EXPECT_TRUE(copy.Get<Tensor>().Writable());
  EXPECT_EQ(Values(view), Values(copy));
  EXPECT_EQ(v.dims(), (DDim{4, 1}));
  // A later Get into the variable that holds the view gets a buffer of its
  // own (it is never read into read-only memory).
  ASSERT_TRUE(c.AsyncGetVar(s.ep, kW, &view, 0)->Wait().ok());
  EXPECT_TRUE(view.Get<Tensor>().Writable());
  EXPECT_EQ(Values(view), Values(copy));
}

TEST(LentParamsTest, OverTcpAViewGetIsACopy) {
  RunningServer s("tcp", 20000);
  rpc::RpcClient c(s.transport.get(), rpc::ClientOptions{.deadline_ms = 10000, .retry_times = 0});
  Variable got;
  ASSERT_TRUE(c.AsyncGetView(s.ep, kW, &got, 0)->Wait().ok());
  EXPECT_TRUE(got.Get<Tensor>().Writable());
  EXPECT_FALSE(got.Get<Tensor>().OverForeignMemory());
}

// The view is the pserver's memory: it keeps the step's value while only
// trainer 0 has pushed its next gradient.
TEST(LentParamsTest, AViewHoldsItsValueUntilEveryTrainersNextGradient) {
  RunningServer s("shm", 20000);
  rpc::RpcClient c(s.transport.get(), rpc::ClientOptions{.deadline_ms = 10000, .retry_times = 0});
  Variable w0[2];
  for (int t = 0; t < 2; ++t) {
    ASSERT_TRUE(c.AsyncGetView(s.ep, kW, &w0[t], t)->Wait().ok());
    ASSERT_TRUE(c.AsyncSendFetchBarrier(s.ep, t)->Wait().ok());
  }
  const std::vector<float> before = Values(w0[0]);
  const std::vector<float> g0 = {0.5f, -1.0f, 2.0f, 0.25f}, g1 = {1.5f, 0.5f, -3.0f, 0.75f};
  Push(c, s, 0, g0);
  EXPECT_EQ(Values(w0[0]), before);  // trainer 1 has not pushed: nothing was written
  Push(c, s, 1, g1);
  Variable w1;
  absl::Status st = c.AsyncGetView(s.ep, kW, &w1, 0)->Wait();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(Values(w1), Stepped(before, {g0, g1}));
}

// Trainer 0 completes after step 1; trainer 1 trains step 2 alone. What
// trainer 0 read in step 1 must stay step 1's value (with the parameters
// left in the region, step 2's update would show through its view).
TEST(LentParamsTest, ACompletedTrainersViewKeepsWhatItLastRead) {
  RunningServer s("shm", 20000);
  rpc::RpcClient c(s.transport.get(), rpc::ClientOptions{.deadline_ms = 10000, .retry_times = 0});
  Variable w0;
  for (int t = 0; t < 2; ++t) {
    ASSERT_TRUE(c.AsyncGetView(s.ep, kW, &w0, t)->Wait().ok());
    ASSERT_TRUE(c.AsyncSendFetchBarrier(s.ep, t)->Wait().ok());
  }
  const std::vector<float> start = Values(w0);
  const std::vector<float> g0 = {0.5f, -1.0f, 2.0f, 0.25f}, g1 = {1.5f, 0.5f, -3.0f, 0.75f};
  Push(c, s, 0, g0);
  Push(c, s, 1, g1);
  Variable step1[2];
  for (int t = 0; t < 2; ++t) {
    ASSERT_TRUE(c.AsyncGetView(s.ep, kW, &step1[t], t)->Wait().ok());
    ASSERT_TRUE(c.AsyncSendFetchBarrier(s.ep, t)->Wait().ok());
  }
  const std::vector<float> want1 = Stepped(start, {g0, g1});
  ASSERT_EQ(Values(step1[0]), want1);
  ASSERT_FALSE(step1[0].Get<Tensor>().Writable());  // a view, not a copy

  ASSERT_TRUE(c.AsyncSendComplete(s.ep, 0)->Wait().ok());
  const std::vector<float> g2 = {-0.5f, 1.0f, 0.25f, -2.0f};
  Push(c, s, 1, g2);
  Variable step2;
  ASSERT_TRUE(c.AsyncGetView(s.ep, kW, &step2, 1)->Wait().ok());
  EXPECT_EQ(Values(step2), Stepped(want1, {g2}));
  EXPECT_TRUE(step2.Get<Tensor>().Writable());  // no longer lent: copied
  EXPECT_EQ(Values(step1[0]), want1);
  EXPECT_EQ(s.ps->stats().steps, 2);
}

}  // namespace
}  // namespace oar
