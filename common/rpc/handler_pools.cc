#include "common/rpc/handler_pools.h"

#include <algorithm>

#include "common/rpc/rpc_metrics.h"

namespace oar::rpc {

HandlerPools::HandlerPools(const ServerOptions& o) {
  auto n = [](int v) { return std::max(1, v); };
  pools_[static_cast<int>(RpcKind::kSend)] = std::make_unique<ThreadPool>(n(o.send_threads));
  pools_[static_cast<int>(RpcKind::kGet)] = std::make_unique<ThreadPool>(n(o.get_threads));
  pools_[static_cast<int>(RpcKind::kGetNoBarrier)] = std::make_unique<ThreadPool>(2);
  pools_[static_cast<int>(RpcKind::kPrefetch)] = std::make_unique<ThreadPool>(n(o.prefetch_threads));
  pools_[static_cast<int>(RpcKind::kCheckpointNotify)] = std::make_unique<ThreadPool>(1);
  max_queued_ = static_cast<size_t>(n(o.max_queued_requests));
}

bool HandlerPools::TrySchedule(RpcKind kind, std::function<void()> fn) {
  absl::ReaderMutexLock l(&mu_);
  ThreadPool* pool = pools_[static_cast<int>(kind)].get();
  metrics::Gauge* depth = Metrics().server_queue_depth->With({KindName(kind)});
  depth->Add(1);
  if (pool != nullptr && pool->TrySchedule(
                             [depth, fn = std::move(fn)] {
                               depth->Add(-1);
                               fn();
                             },
                             max_queued_)) {
    return true;
  }
  depth->Add(-1);
  Metrics().server_rejected->With({KindName(kind)})->Add();
  return false;
}

void HandlerPools::Stop() {
  std::unique_ptr<ThreadPool> stopping[kNumRpcKinds];
  {
    absl::WriterMutexLock l(&mu_);
    stopped_ = true;
    for (int k = 0; k < kNumRpcKinds; ++k) stopping[k] = std::move(pools_[k]);
  }
  // Destroyed outside the lock: each runs what is queued and joins, and a
  // handler still running may schedule (and be refused) meanwhile.
  for (auto& p : stopping) p.reset();
}

bool HandlerPools::stopped() const {
  absl::ReaderMutexLock l(&mu_);
  return stopped_;
}

uint64_t MaxRequestBytes(const ServerOptions& o, const RpcHandler& handler) {
  if (o.max_message_bytes > 0) return o.max_message_bytes;
  return handler.MaxRequestBytes();
}

int ReadSlots(const ServerOptions& o, uint64_t max_request_bytes) {
  const int64_t budget = o.max_inflight_request_bytes;
  if (budget <= 0 || max_request_bytes == 0) return 0;
  return static_cast<int>(std::clamp<uint64_t>(static_cast<uint64_t>(budget) / max_request_bytes, 2, 1 << 20));
}

ServerOptions ServeOptions(const RpcOptions& rpc, std::string endpoint) {
  ServerOptions o;
  o.endpoint = std::move(endpoint);
  o.send_threads = rpc.send_threads;
  o.get_threads = rpc.get_threads;
  o.prefetch_threads = rpc.prefetch_threads;
  o.auth_token = rpc.auth_token;
  o.tls_cert = rpc.tls_cert;
  o.tls_key = rpc.tls_key;
  o.max_message_bytes = rpc.max_message_bytes > 0 ? static_cast<uint64_t>(rpc.max_message_bytes) : 0;
  o.max_queued_requests = rpc.max_queued_requests;
  o.max_inflight_request_bytes = rpc.max_inflight_request_bytes;
  return o;
}

}  // namespace oar::rpc
