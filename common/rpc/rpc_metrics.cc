#include "common/rpc/rpc_metrics.h"

namespace oar::rpc {

const RpcMetrics& Metrics() {
  static const RpcMetrics* m = [] {
    metrics::Registry& r = metrics::Default();
    auto* out = new RpcMetrics;
    out->client_duration = r.AddHistogram("oar_rpc_client_duration_seconds",
                                          "RPC calls from this process, retries included", {"method", "peer"});
    out->client_sent_bytes =
        r.AddCounter("oar_rpc_client_sent_bytes_total", "Payload bytes this process sent in RPCs", {"method", "peer"});
    out->client_received_bytes = r.AddCounter("oar_rpc_client_received_bytes_total",
                                              "Payload bytes this process received in RPC replies", {"method", "peer"});
    out->client_retries =
        r.AddCounter("oar_rpc_client_retries_total", "RPC attempts after a call's first", {"method", "peer"});
    out->client_errors =
        r.AddCounter("oar_rpc_client_errors_total", "RPC calls that failed, by status code", {"method", "code"});
    out->client_viewed_bytes = r.AddCounter(
        "oar_rpc_client_viewed_bytes_total",
        "Reply payload bytes read in place, through a read-only view of the shared memory a server lent, not copied",
        {});
    out->server_queue_depth =
        r.AddGauge("oar_rpc_server_queue_depth", "Requests waiting for a handler thread", {"method"});
    out->server_rejected = r.AddCounter("oar_rpc_server_rejected_total",
                                        "Requests refused because their handler queue was full", {"method"});
    out->server_lent_bytes = r.AddCounter(
        "oar_rpc_server_lent_bytes_total",
        "Reply payload bytes this server answered with their place in the shared memory it lent, not the bytes", {});
    out->client_lent_bytes = r.AddCounter(
        "oar_rpc_client_lent_bytes_total",
        "Request payload bytes sent as their place in the shared memory this client lent its server, not the bytes",
        {});
    out->server_viewed_bytes = r.AddCounter(
        "oar_rpc_server_viewed_bytes_total",
        "Request payload bytes read in place, through a read-only view of the shared memory a client lent", {});
    return out;
  }();
  return *m;
}

void RecordClientCall(const char* method, const std::string& peer, double seconds, uint64_t sent_bytes, int retries,
                      const absl::Status& status) {
  const RpcMetrics& m = Metrics();
  m.client_duration->With({method, peer})->Observe(seconds);
  m.client_sent_bytes->With({method, peer})->Add(static_cast<double>(sent_bytes));
  if (retries > 0) m.client_retries->With({method, peer})->Add(retries);
  if (!status.ok()) m.client_errors->With({method, absl::StatusCodeToString(status.code())})->Add();
}

const char* MethodLabel(RpcKind kind, const std::string& name) {
  if (kind == RpcKind::kSend) {
    if (name == kBatchBarrier) return "BatchBarrier";
    if (name == kFetchBarrier) return "FetchBarrier";
    if (name == kComplete) return "Complete";
    if (name == kAbort) return "Abort";
    if (name == kJoinHold) return "JoinHold";
    if (name == kJoin) return "Join";
  }
  if (kind == RpcKind::kCheckpointNotify) return "Checkpoint";
  return KindName(kind);
}

}  // namespace oar::rpc
