// RpcClient's BATCH_BARRIER carries how many variables the trainer sent
// that endpoint since its previous barrier (VariableMessage.oar_sent), per
// trainer id and endpoint; control messages do not count. SendBatchBarriers
// waits for the sends before the barriers over a transport that does not
// keep order (in-process here), and reports a failed send rather than the
// barrier. Over one that claims order, a barrier the server refused for
// overtaking its sends is sent again once they were answered, even with no
// retries allowed.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/rpc/inprocess_transport.h"
#include "common/rpc/rpc_client.h"
#include "gtest/gtest.h"

namespace oar::rpc {
namespace {

// Records each request's name and oar_sent, in arrival order; refuses "bad".
class RecordingHandler : public RpcHandler {
 public:
  absl::Status Handle(RpcKind /*kind*/, const IncomingMessage& req, Reply* /*reply*/) override {
    absl::MutexLock l(&mu_);
    seen_.emplace_back(req.header().name(), req.header().meta.oar_sent());
    if (req.header().name() == "bad") return absl::InvalidArgumentError("no such gradient");
    return absl::OkStatus();
  }
  std::vector<std::pair<std::string, int64_t>> seen() {
    absl::MutexLock l(&mu_);
    return seen_;
  }
  int64_t SentOfLastBarrier() {
    absl::MutexLock l(&mu_);
    for (auto it = seen_.rbegin(); it != seen_.rend(); ++it) {
      if (it->first == kBatchBarrier) return it->second;
    }
    return -1;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<std::string, int64_t>> seen_ ABSL_GUARDED_BY(mu_);
};

Variable Floats(int n) {
  Variable v;
  v.GetMutable<Tensor>()->mutable_data<float>({n});
  return v;
}

TEST(BatchBarrierCountTest, EachBarrierCountsItsEndpointsSendsSinceTheLastOne) {
  InProcessTransport net;
  RecordingHandler ha, hb;
  auto la = net.Listen({.endpoint = "127.0.0.1:0"}, &ha);
  auto lb = net.Listen({.endpoint = "127.0.0.1:0"}, &hb);
  ASSERT_TRUE(la.ok() && lb.ok());
  const std::string a = (*la)->endpoint(), b = (*lb)->endpoint();
  RpcClient client(&net);
  Variable g = Floats(4);
  for (const char* name : {"w@GRAD.block0", "b@GRAD", "w2@GRAD"}) {
    client.AddPending(0, client.AsyncSendVar(a, name, &g, {.trainer_id = 0}));
  }
  client.AddPending(0, client.AsyncSendVar(b, "w@GRAD.block1", &g, {.trainer_id = 0}));
  client.AddPending(1, client.AsyncSendVar(a, "w@GRAD.block0", &g, {.trainer_id = 1}));  // another trainer's
  // Arrived before trainer 0's barrier (so it would count if counts mixed
  // trainers), and not after it (the barrier must be the last request seen).
  ASSERT_TRUE(client.WaitPending(1).ok());
  ASSERT_TRUE(client.SendBatchBarriers(0, {a, b}).ok());
  EXPECT_EQ(ha.SentOfLastBarrier(), 3);
  EXPECT_EQ(hb.SentOfLastBarrier(), 1);
  // Not ordered (in-process): every send was answered before its barrier.
  const auto seen = ha.seen();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().first, kBatchBarrier);
  // The count starts again; control messages do not count.
  ASSERT_TRUE(client.AsyncSendFetchBarrier(a, 0)->Wait().ok());
  ASSERT_TRUE(client.AsyncSendVar(a, "w@GRAD.block0", &g, {.trainer_id = 0})->Wait().ok());
  ASSERT_TRUE(client.SendBatchBarriers(0, {a, b}).ok());
  EXPECT_EQ(ha.SentOfLastBarrier(), 1);
  EXPECT_EQ(hb.SentOfLastBarrier(), 0);  // nothing sent there: no count to check
  ASSERT_TRUE(client.SendBatchBarriers(1, {a}).ok());
  EXPECT_EQ(ha.SentOfLastBarrier(), 1);  // trainer 1's own count
}

TEST(BatchBarrierCountTest, AFailedSendIsTheErrorAndNoBarrierFollowsIt) {
  InProcessTransport net;
  RecordingHandler h;
  auto l = net.Listen({.endpoint = "127.0.0.1:0"}, &h);
  ASSERT_TRUE(l.ok());
  const std::string ep = (*l)->endpoint();
  RpcClient client(&net);
  Variable g = Floats(2);
  client.AddPending(3, client.AsyncSendVar(ep, "bad", &g, {.trainer_id = 3}));
  absl::Status s = client.SendBatchBarriers(3, {ep});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("'bad'"), std::string::npos) << s;
  EXPECT_EQ(h.SentOfLastBarrier(), -1);  // no barrier was sent
}

// An in-process transport that claims to keep order, as the tcp and shm
// streams do: SendBatchBarriers writes the barrier ahead of the sends'
// answers.
class ClaimsOrder : public Transport {
 public:
  std::string Name() const override { return "ordered in-process"; }
  void Call(RpcKind kind, const std::string& ep, std::shared_ptr<const OutgoingMessage> request, absl::Time deadline,
            CallDone done) override {
    inner_.Call(kind, ep, std::move(request), deadline, std::move(done));
  }
  bool KeepsOrder(const std::string& /*ep*/) override { return true; }
  absl::Status WaitReady(const std::string& ep, absl::Time deadline) override { return inner_.WaitReady(ep, deadline); }
  absl::StatusOr<std::unique_ptr<Listener>> Listen(const ServerOptions& options, RpcHandler* handler) override {
    return inner_.Listen(options, handler);
  }

 private:
  InProcessTransport inner_;
};

// Counts stored gradients as StepBarrier does and refuses a barrier that
// came before them (UNAVAILABLE: nothing changed). A gradient is held until
// a barrier was seen, so the barrier always overtakes it.
class OvertakenHandler : public RpcHandler {
 public:
  absl::Status Handle(RpcKind /*kind*/, const IncomingMessage& req, Reply* /*reply*/) override {
    absl::MutexLock l(&mu_);
    if (req.header().name() == kBatchBarrier) {
      ++barriers_seen_;
      if (stored_ < req.header().meta.oar_sent()) {
        return absl::UnavailableError(
            absl::StrCat("the barrier came before ", req.header().meta.oar_sent() - stored_, " gradient(s)"));
      }
      ++counted_;
      return absl::OkStatus();
    }
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](int* n) { return *n > 0; }, &barriers_seen_),
                         absl::Seconds(5));
    ++stored_;
    return absl::OkStatus();
  }
  int counted() {
    absl::MutexLock l(&mu_);
    return counted_;
  }
  int barriers_seen() {
    absl::MutexLock l(&mu_);
    return barriers_seen_;
  }

 private:
  absl::Mutex mu_;
  int barriers_seen_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stored_ ABSL_GUARDED_BY(mu_) = 0;
  int counted_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(BatchBarrierCountTest, ABarrierRefusedForOvertakingItsSendsIsSentAgainEvenWithoutRetries) {
  ClaimsOrder net;
  OvertakenHandler h;
  auto l = net.Listen({.endpoint = "127.0.0.1:0"}, &h);
  ASSERT_TRUE(l.ok());
  const std::string ep = (*l)->endpoint();
  RpcClient client(&net, ClientOptions{.deadline_ms = 60000, .retry_times = 0});
  Variable g = Floats(2);
  client.AddPending(0, client.AsyncSendVar(ep, "w@GRAD", &g, {.trainer_id = 0}));
  absl::Status s = client.SendBatchBarriers(0, {ep});
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(h.counted(), 1);
  EXPECT_EQ(h.barriers_seen(), 2) << "refused ahead of the gradient, then counted after it";
}

}  // namespace
}  // namespace oar::rpc
