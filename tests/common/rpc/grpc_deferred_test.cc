// The gRPC server offers a request to the handler's deferred path before a
// pool thread (as the stream transports do): Gets the handler parks hold no
// thread, so with every Get thread's worth of them parked, another Get is
// still served — the deadlock a sync pserver with more parameters than Get
// threads met when one trainer's early Gets waited for a step another
// trainer could not join. Parked Gets are answered when the handler
// responds.
#include <atomic>
#include <functional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/rpc/grpc_server.h"
#include "common/rpc/grpc_transport.h"
#include "common/rpc/rpc_client.h"
#include "gtest/gtest.h"

namespace oar::rpc {
namespace {

// Parks Gets of "later" until Release(); serves any other Get at once.
class ParkingHandler : public RpcHandler {
 public:
  // The usual path: "later" waits for Release on its pool thread, as a
  // pserver's Get waits at the step barrier.
  absl::Status Handle(RpcKind kind, const IncomingMessage& req, Reply* reply) override {
    reply->name = req.header().name();
    float value = 7.f;
    if (reply->name == "later") {
      absl::MutexLock l(&mu_);
      ++blocked_;
      mu_.AwaitWithTimeout(absl::Condition(&released_), absl::Seconds(20));
      value = 3.f;
    }
    reply->var.GetMutable<Tensor>()->mutable_data<float>({1})[0] = value;
    return absl::OkStatus();
  }
  int waiting() {  // parked, or blocking a thread
    absl::MutexLock l(&mu_);
    return static_cast<int>(parked_.size()) + blocked_;
  }
  bool Defers(RpcKind kind) const override { return kind == RpcKind::kGet; }
  bool TryHandleDeferred(RpcKind kind, std::shared_ptr<const IncomingMessage> request,
                         const Respond& respond) override {
    if (request->header().name() != "later") return false;  // the usual path: a pool thread
    absl::MutexLock l(&mu_);
    parked_.push_back(respond);
    return true;
  }
  int parked() {
    absl::MutexLock l(&mu_);
    return static_cast<int>(parked_.size());
  }
  void Release() {
    std::vector<Respond> all;
    {
      absl::MutexLock l(&mu_);
      released_ = true;
      all.swap(parked_);
    }
    for (const Respond& r : all) {
      Reply reply;
      reply.name = "later";
      reply.var.GetMutable<Tensor>()->mutable_data<float>({1})[0] = 3.f;
      r(absl::OkStatus(), std::move(reply));
    }
  }

 private:
  absl::Mutex mu_;
  std::vector<Respond> parked_;
  int blocked_ = 0;
  bool released_ = false;
};

TEST(GrpcDeferredTest, ParkedGetsHoldNoThreadAndAreAnsweredWhenReleased) {
  ParkingHandler h;
  ServerOptions o;
  o.endpoint = "127.0.0.1:0";
  o.get_threads = 1;  // one Get thread: any parked Get holding it would starve the next
  auto server = GrpcServer::Start(o, &h);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string ep = (*server)->endpoint();
  GrpcTransport transport;
  RpcClient client(&transport, ClientOptions{.deadline_ms = 5000, .retry_times = 0});
  std::vector<Variable> later(3);
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (auto& v : later) calls.push_back(client.AsyncGetVar(ep, "later", &v));
  for (int i = 0; i < 500 && h.waiting() < 1; ++i) absl::SleepFor(absl::Milliseconds(10));
  Variable now;
  const absl::Status served = client.AsyncGetVar(ep, "now", &now)->Wait();
  ASSERT_TRUE(served.ok()) << "a Get behind parked ones was not served: " << served;
  EXPECT_EQ(h.parked(), 3);
  EXPECT_EQ(now.Get<Tensor>().data<float>()[0], 7.f);
  h.Release();
  for (size_t i = 0; i < calls.size(); ++i) {  // answered whenever the handler responds
    ASSERT_TRUE(calls[i]->Wait().ok()) << i;
    EXPECT_EQ(later[i].Get<Tensor>().data<float>()[0], 3.f);
  }
}

}  // namespace
}  // namespace oar::rpc
