// The process's own gauges, by Prometheus' names for them (what its client
// libraries export): process_resident_memory_bytes,
// process_virtual_memory_bytes, process_cpu_seconds_total,
// process_start_time_seconds, process_open_fds, read from /proc when
// scraped.
//
//   metrics::AddProcessMetrics(&metrics::Default());
//
// Thread-safety: safe for concurrent use (each read opens its /proc file).
#pragma once

#include "common/metrics/metrics.h"

namespace oar::metrics {

void AddProcessMetrics(Registry* registry);

}  // namespace oar::metrics
