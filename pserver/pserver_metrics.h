// The pserver's metrics (common/metrics), in metrics::Default():
//
//   oar_pserver_requests_total{method}              requests handled (answered OK or not)
//   oar_pserver_request_duration_seconds{method}    time in the handler, barrier waits included
//   oar_pserver_received_bytes_total{trainer}       gradient payload bytes received
//   oar_pserver_optimize_duration_seconds           one optimize block's run
//   oar_pserver_steps_total                         sync steps completed (optimize rounds)
//   oar_pserver_parameter_bytes                     bytes of the persistable tensors it holds
//
// `method` as in common/rpc/rpc_metrics.h (BatchBarrier, FetchBarrier,
// SendVariable, GetVariable, ...); a sync pserver's
// oar_pserver_request_duration_seconds{method="GetVariable"} holds the
// trainers' wait for the step's optimize.
//
// Thread-safety: safe for concurrent use.
#pragma once

#include "common/framework/program_desc.h"
#include "common/framework/scope.h"
#include "common/metrics/metrics.h"

namespace oar {

struct PserverMetrics {
  metrics::Family<metrics::Counter>* requests;
  metrics::Family<metrics::Histogram>* request_duration;
  metrics::Family<metrics::Counter>* received_bytes;
  metrics::Histogram* optimize_duration;
  metrics::Counter* steps;
  metrics::Gauge* parameter_bytes;
  metrics::Counter* trainer_joins;       // elastic jobs: trainers that became members
  metrics::Counter* trainer_leaves;      // and that left without completing
  metrics::Counter* trainers_taken_out;  // silent for a lease while a step waited on them
};

const PserverMetrics& GetPserverMetrics();

// What the pserver records for each request it handled.
void RecordPserverRequest(const char* method, double seconds);

// The bytes of every initialized persistable tensor in `scope` (parameters,
// optimizer accumulators, learning rates) that `program`'s block 0 declares.
double PersistableBytes(const ProgramDesc& program, const Scope& scope);

}  // namespace oar
