// FaultInjectingTransport: a Transport wrapper that misbehaves on purpose,
// by a seeded schedule, the way networks and overloaded peers do — the
// fault suite's tool (tests/pserver/fault_*_test.cc, `oar run
// --rpc_fault_injection`). Per call it may
//   drop_request  never deliver it; the caller sees UNAVAILABLE (and retries)
//   drop_reply    deliver it, lose the answer: UNAVAILABLE, so the retry
//                 reaches the server a second time (a duplicate)
//   duplicate     deliver it twice, the copy up to max_delay later
//   delay         hold it back up to max_delay before delivering
//   reorder       hold it until the next call to the same endpoint has gone
//                 out (or max_delay passed), so the two arrive swapped
//   fail          answer INTERNAL without delivering (not retried: the job fails)
// Decisions are drawn from a hash of (seed, endpoint, kind, variable,
// trainer, sequence number, attempt), so the same message meets the same
// fate in every run whatever the threads' interleaving.
//
//   FaultSpec spec = *FaultSpec::Parse("seed=7,drop_reply=0.05,duplicate=0.05,delay=0.2");
//   FaultInjectingTransport faulty(&grpc, spec);
//   RpcClient client(&faulty);
//
// Thread-safety: safe for concurrent use. Destroy it after every call it
// carried has finished.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "absl/synchronization/mutex.h"
#include "common/rpc/timer.h"
#include "common/rpc/transport.h"

namespace oar::rpc {

struct FaultSpec {
  uint64_t seed = 1;
  double drop_request = 0, drop_reply = 0, duplicate = 0, delay = 0, reorder = 0, fail = 0;
  absl::Duration max_delay = absl::Milliseconds(20);
  // "seed=7,drop_request=0.02,drop_reply=0.02,duplicate=0.05,delay=0.1,reorder=0.05,fail=0,max_delay_ms=20";
  // InvalidArgument naming the bad entry. "" gives the spec that injects nothing.
  static absl::StatusOr<FaultSpec> Parse(const std::string& text);
  bool Any() const { return drop_request + drop_reply + duplicate + delay + reorder + fail > 0; }
};

// How many of each fault were injected (a fault test checks they happened).
struct FaultStats {
  int64_t calls = 0, dropped_requests = 0, dropped_replies = 0, duplicated = 0, delayed = 0, reordered = 0, failed = 0;
  std::string ToString() const;
};

class FaultInjectingTransport final : public Transport {
 public:
  FaultInjectingTransport(Transport* inner, FaultSpec spec);
  ~FaultInjectingTransport() override;

  std::string Name() const override { return "faulty(" + inner_->Name() + ")"; }
  void Call(RpcKind kind, const std::string& ep, std::shared_ptr<const OutgoingMessage> request, absl::Time deadline,
            CallDone done) override;
  // A call forwarded as it is keeps the inner transport's ReplyReader;
  // one held or delayed here has none.
  std::unique_ptr<ReplyReader> CallForWaiter(RpcKind kind, const std::string& ep,
                                             std::shared_ptr<const OutgoingMessage> request, absl::Time deadline,
                                             CallDone done) override;
  absl::Status WaitReady(const std::string& ep, absl::Time deadline) override {
    return inner_->WaitReady(ep, deadline);
  }
  // What the inner transport claims, although this one may reorder calls:
  // that is the fault the barrier's count (oar_sent) must survive.
  bool KeepsOrder(const std::string& ep) override { return inner_->KeepsOrder(ep); }
  bool LendsSharedMemory() const override { return inner_->LendsSharedMemory(); }
  absl::StatusOr<std::unique_ptr<Listener>> Listen(const ServerOptions& options, RpcHandler* handler) override {
    return inner_->Listen(options, handler);
  }
  FaultStats stats() const;

 private:
  struct Held;
  // A uniform draw in [0, 1) for `what` of this message.
  double Draw(uint64_t message, int what) const;
  void Forward(RpcKind kind, const std::string& ep, std::shared_ptr<const OutgoingMessage> request, absl::Time deadline,
               CallDone done, bool lose_reply, std::unique_ptr<ReplyReader>* reader = nullptr);
  void ReleaseHeld(const std::string& ep);

  Transport* inner_;
  FaultSpec spec_;
  mutable absl::Mutex mu_;
  std::map<std::tuple<std::string, int, std::string, int64_t, int64_t>, int> attempts_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Held>> held_ ABSL_GUARDED_BY(mu_);  // reorder: one per endpoint
  FaultStats stats_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> in_flight_{0};
  Timer timer_;
};

// `inner` wrapped by the schedule of its options().fault_injection
// (--rpc_fault_injection) when one is set, else `inner` itself (the
// wrapper, if any, is kept in `*holder`).
absl::StatusOr<Transport*> MaybeInjectFaults(Transport* inner, std::unique_ptr<Transport>* holder);

}  // namespace oar::rpc
