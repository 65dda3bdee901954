// The RPC layer's metrics (common/metrics), defined once for the client
// (rpc_client.cc), the servers' handler pools and the pserver:
//
//   oar_rpc_client_duration_seconds{method,peer}   a call, retries included
//   oar_rpc_client_sent_bytes_total{method,peer}   payload bytes sent
//   oar_rpc_client_received_bytes_total{method,peer}
//   oar_rpc_client_retries_total{method,peer}      attempts after the first
//   oar_rpc_client_errors_total{method,code}       calls that failed, by status code
//   oar_rpc_client_viewed_bytes_total              reply payloads read where a server's
//                                                  lent shared memory holds them, not copied
//   oar_rpc_server_queue_depth{method}             requests waiting for a handler thread
//   oar_rpc_server_rejected_total{method}          requests refused on a full queue
//   oar_rpc_server_lent_bytes_total                reply payloads answered with where
//                                                  they lie in lent shared memory
//   oar_rpc_client_lent_bytes_total                request payloads sent as where they
//                                                  lie in the client's lent memory (LentSends)
//   oar_rpc_server_viewed_bytes_total              request payloads read in place there
//
// `method` is the RPC (SendVariable, GetVariable, ...), except that the
// control messages get their own: BatchBarrier, FetchBarrier, Complete,
// Checkpoint, so a trainer's barrier wait is
// oar_rpc_client_duration_seconds{method="BatchBarrier"} (and FetchBarrier).
//
// Thread-safety: safe for concurrent use.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

#include "common/metrics/metrics.h"
#include "common/rpc/rpc_common.h"

namespace oar::rpc {

struct RpcMetrics {
  metrics::Family<metrics::Histogram>* client_duration;
  metrics::Family<metrics::Counter>* client_sent_bytes;
  metrics::Family<metrics::Counter>* client_received_bytes;
  metrics::Family<metrics::Counter>* client_retries;
  metrics::Family<metrics::Counter>* client_errors;
  metrics::Family<metrics::Counter>* client_viewed_bytes;
  metrics::Family<metrics::Gauge>* server_queue_depth;
  metrics::Family<metrics::Counter>* server_rejected;
  metrics::Family<metrics::Counter>* server_lent_bytes;
  metrics::Family<metrics::Counter>* client_lent_bytes;
  metrics::Family<metrics::Counter>* server_viewed_bytes;
};

// The families in metrics::Default(), registered on first use.
const RpcMetrics& Metrics();

// The `method` label of a call of `kind` carrying variable `name`.
const char* MethodLabel(RpcKind kind, const std::string& name);

// What the client records when a call ends: its time, the payload bytes it
// sent, its retries, and its status code if it failed.
void RecordClientCall(const char* method, const std::string& peer, double seconds, uint64_t sent_bytes, int retries,
                      const absl::Status& status);

}  // namespace oar::rpc
