#include "pserver/pserver_metrics.h"

#include "common/framework/data_type.h"
#include "common/framework/tensor.h"

namespace oar {

const PserverMetrics& GetPserverMetrics() {
  static const PserverMetrics* m = [] {
    metrics::Registry& r = metrics::Default();
    auto* out = new PserverMetrics;
    out->requests = r.AddCounter("oar_pserver_requests_total", "Requests this pserver handled", {"method"});
    out->request_duration = r.AddHistogram("oar_pserver_request_duration_seconds",
                                           "Time in this pserver's handler, barrier waits included", {"method"});
    out->received_bytes =
        r.AddCounter("oar_pserver_received_bytes_total", "Gradient payload bytes this pserver received", {"trainer"});
    out->optimize_duration =
        r.AddHistogram("oar_pserver_optimize_duration_seconds", "One optimize block's run")->With({});
    out->steps = r.AddCounter("oar_pserver_steps_total", "Sync steps this pserver completed")->With({});
    out->parameter_bytes =
        r.AddGauge("oar_pserver_parameter_bytes", "Bytes of the persistable tensors this pserver holds")->With({});
    out->trainer_joins =
        r.AddCounter("oar_pserver_elastic_joins_total", "Trainers that joined this elastic job")->With({});
    out->trainer_leaves =
        r.AddCounter("oar_pserver_elastic_leaves_total", "Trainers that left this elastic job without completing")
            ->With({});
    out->trainers_taken_out = r.AddCounter("oar_pserver_elastic_silent_trainers_total",
                                           "Trainers this pserver took out of an elastic job (their leases revoked) "
                                           "after a step waited on them, silent, for a lease's TTL")
                                  ->With({});
    return out;
  }();
  return *m;
}

void RecordPserverRequest(const char* method, double seconds) {
  const PserverMetrics& m = GetPserverMetrics();
  m.requests->With({method})->Add();
  m.request_duration->With({method})->Observe(seconds);
}

double PersistableBytes(const ProgramDesc& program, const Scope& scope) {
  double bytes = 0;
  for (const auto& [name, desc] : program.Block(0).vars()) {
    if (!desc.persistable) continue;
    const Variable* v = scope.FindVar(name);
    if (v == nullptr || !v->IsType<Tensor>() || !v->Get<Tensor>().initialized()) continue;
    const Tensor& t = v->Get<Tensor>();
    bytes += static_cast<double>(t.numel()) * static_cast<double>(SizeOf(t.dtype()));
  }
  return bytes;
}

}  // namespace oar
