// ReadGate alone (slots, parking order, cancellation) and inside GrpcServer:
// gradient requests beyond the in-flight budget stay unread until a slot is
// free, small requests that wait in their handler (barriers) hold no slot,
// and a parked call whose deadline passes leaves the gate as it was.
#include "common/rpc/read_gate.h"

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/rpc/grpc_server.h"
#include "common/rpc/grpc_transport.h"
#include "common/rpc/rpc_client.h"
#include "gtest/gtest.h"

namespace oar::rpc {
namespace {

TEST(ReadGateTest, StartsUpToItsSlotsThenParksInOrder) {
  ReadGate gate(2);
  std::vector<int> started;
  int keys[4];
  for (int i = 0; i < 4; ++i) gate.Enter(&keys[i], [&started, i] { started.push_back(i); });
  EXPECT_EQ(started, (std::vector<int>{0, 1}));
  EXPECT_EQ(gate.parked(), 2);
  gate.Leave();  // the oldest parked call takes the slot
  EXPECT_EQ(started, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(gate.parked(), 1);
}

TEST(ReadGateTest, ACancelledCallNeverStartsAndHoldsNoSlot) {
  ReadGate gate(1);
  std::vector<int> started;
  int keys[3];
  for (int i = 0; i < 3; ++i) gate.Enter(&keys[i], [&started, i] { started.push_back(i); });
  EXPECT_TRUE(gate.Cancel(&keys[1]));
  EXPECT_FALSE(gate.Cancel(&keys[1]));  // already gone
  EXPECT_FALSE(gate.Cancel(&keys[0]));  // started: not parked
  gate.Leave();
  EXPECT_EQ(started, (std::vector<int>{0, 2}));
  gate.Leave();
  int late;
  gate.Enter(&late, [&started] { started.push_back(9); });  // the slot came back
  EXPECT_EQ(started, (std::vector<int>{0, 2, 9}));
}

TEST(ReadGateTest, NoSlotsMeansNoBound) {
  ReadGate gate(0);
  int n = 0;
  int keys[100];
  for (int& k : keys) gate.Enter(&k, [&n] { ++n; });
  EXPECT_EQ(n, 100);
  EXPECT_EQ(gate.parked(), 0);
}

// Sends named hold* wait in the handler until Release; counts what it has
// seen, large and small.
class HoldingHandler : public RpcHandler {
 public:
  absl::Status Handle(RpcKind, const IncomingMessage& req, Reply*) override {
    absl::MutexLock l(&mu_);
    const bool large = req.header().payload_bytes >= ReadGate::kSmallRequestBytes;
    ++(large ? large_ : small_);
    if (req.header().name().rfind("hold", 0) != 0) return absl::OkStatus();
    ++active_;
    max_active_ = std::max(max_active_, active_);
    mu_.AwaitWithTimeout(absl::Condition(&release_), absl::Seconds(30));
    --active_;
    return absl::OkStatus();
  }
  uint64_t MaxRequestBytes() const override { return kBlock + 4096; }
  void Release() {
    absl::MutexLock l(&mu_);
    release_ = true;
  }
  // Waits (bounded) until `n` hold* requests are in the handler.
  bool AwaitActive(int n) {
    absl::MutexLock l(&mu_);
    auto reached = [this, n] { return active_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(20));
  }
  int large() {
    absl::MutexLock l(&mu_);
    return large_;
  }
  int small() {
    absl::MutexLock l(&mu_);
    return small_;
  }
  int max_active() {
    absl::MutexLock l(&mu_);
    return max_active_;
  }

  static constexpr int64_t kBlock = 512 * 1024;

 private:
  absl::Mutex mu_;
  int large_ = 0, small_ = 0, active_ = 0, max_active_ = 0;
  bool release_ = false;
};

Variable Floats(int64_t bytes) {
  Variable v;
  float* p = v.GetMutable<Tensor>()->mutable_data<float>({bytes / 4});
  for (int64_t i = 0; i < bytes / 4; ++i) p[i] = static_cast<float>(i % 7);
  return v;
}

// A server with 2 read slots and 6 handler threads (the gate, not the pool,
// is the bound), a client that waits long, and one that does not.
class GatedServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.endpoint = "127.0.0.1:0";
    o.send_threads = 6;
    o.max_inflight_request_bytes = 2 * static_cast<int64_t>(h.MaxRequestBytes());
    auto s = GrpcServer::Start(o, &h);
    ASSERT_TRUE(s.ok()) << s.status();
    server = *std::move(s);
    ep = server->endpoint();
  }
  void TearDown() override { h.Release(); }

  HoldingHandler h;
  std::unique_ptr<GrpcServer> server;
  std::string ep;
  GrpcTransport transport;
  RpcClient patient{&transport, ClientOptions{.deadline_ms = 60000, .retry_times = 0}};
  RpcClient hasty{&transport, ClientOptions{.deadline_ms = 2000, .retry_times = 0}};  // < the holds' 30 s
  Variable block = Floats(HoldingHandler::kBlock);
};

TEST_F(GatedServerTest, ReadsNoMoreLargeSendsThanItsBudget) {
  std::vector<std::shared_ptr<RpcCall>> sends;
  for (int i = 0; i < 5; ++i) sends.push_back(patient.AsyncSendVar(ep, "hold" + std::to_string(i), &block));
  ASSERT_TRUE(h.AwaitActive(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // room for a third, were it read
  EXPECT_EQ(h.large(), 2) << "three sends must wait unread while two hold both slots";
  h.Release();
  for (auto& c : sends) {
    absl::Status s = c->Wait();
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(h.large(), 5);
  EXPECT_EQ(h.max_active(), 2);
}

TEST_F(GatedServerTest, SmallRequestsWaitingInTheirHandlerHoldNoSlot) {
  Variable tiny = Floats(16);
  // Two barrier-like calls wait in the handler for others, as BATCH_BARRIER does.
  auto b0 = patient.AsyncSendVar(ep, "hold_barrier0", &tiny);
  auto b1 = patient.AsyncSendVar(ep, "hold_barrier1", &tiny);
  ASSERT_TRUE(h.AwaitActive(2));
  absl::Status s = hasty.AsyncSendVar(ep, "g", &block)->Wait();
  EXPECT_TRUE(s.ok()) << s;  // both slots were free for the gradient
  EXPECT_EQ(h.large(), 1);
  h.Release();
  EXPECT_TRUE(b0->Wait().ok());
  EXPECT_TRUE(b1->Wait().ok());
}

TEST_F(GatedServerTest, AParkedSendPastItsDeadlineFailsAndLeavesTheGateWhole) {
  auto first = patient.AsyncSendVar(ep, "hold_a", &block);
  auto second = patient.AsyncSendVar(ep, "hold_b", &block);
  ASSERT_TRUE(h.AwaitActive(2));
  absl::Status s = hasty.AsyncSendVar(ep, "c", &block)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("'c'"), std::string::npos) << s;
  h.Release();
  EXPECT_TRUE(first->Wait().ok());
  EXPECT_TRUE(second->Wait().ok());
  // Both slots came back: two more large sends are served side by side.
  auto third = patient.AsyncSendVar(ep, "d", &block);
  auto fourth = patient.AsyncSendVar(ep, "e", &block);
  EXPECT_TRUE(third->Wait().ok());
  EXPECT_TRUE(fourth->Wait().ok());
  EXPECT_EQ(h.large(), 4) << "the cancelled send never reached the handler";
}

}  // namespace
}  // namespace oar::rpc
