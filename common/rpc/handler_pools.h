// HandlerPools: a server's thread pools, one per RPC kind (sizes from
// ServerOptions), each with a bounded queue (max_queued_requests): a request that finds its queue full is
// refused rather than held. The serving halves of every transport
// (GrpcServer, the in-process transport) share this, so they bound alike.
//
// Shutdown (Stop or the destructor): each pool runs what is queued, then
// joins; a TrySchedule from then on is refused (stopped() says why).
//
// Thread-safety: TrySchedule and stopped() are safe for concurrent use, also
// with Stop (a client of the in-process transport may be scheduling on a
// server that is shutting down); Stop from the owner, not from a handler.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "common/base/thread_pool.h"
#include "common/rpc/transport.h"

namespace oar::rpc {

class HandlerPools {
 public:
  explicit HandlerPools(const ServerOptions& o);
  // Queues `fn` on `kind`'s pool; false (fn dropped) when that queue is full.
  bool TrySchedule(RpcKind kind, std::function<void()> fn);
  void Stop();
  bool stopped() const;
  size_t max_queued() const { return max_queued_; }

 private:
  mutable absl::Mutex mu_;  // held shared while scheduling, exclusive while Stop takes the pools
  std::unique_ptr<ThreadPool> pools_[kNumRpcKinds] ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  size_t max_queued_ = 0;
};

// The largest request a server reads: the option, else
// --rpc_max_message_bytes, else the handler's own bound (0: none).
uint64_t MaxRequestBytes(const ServerOptions& o, const RpcHandler& handler);
// How many gradient requests a server holds read at once (ReadGate): the
// in-flight byte budget (the option, else --rpc_max_inflight_request_bytes)
// over the largest request, at least 2; 0 (no bound) when either is 0.
int ReadSlots(const ServerOptions& o, uint64_t max_request_bytes);

}  // namespace oar::rpc
