// What `oar train` and `oar run` do with their metrics (common/metrics):
// serve them over HTTP for Prometheus while the process runs
// (--metrics_port, --metrics_host), and write them once more when it ends
// (--metrics_file; the text format node_exporter's textfile collector
// reads, so a finished job's totals are not lost with the process), or
// keep serving them --metrics_linger_s seconds after the work ends.
//
//   OAR_ASSIGN_OR_RETURN(auto metrics, MetricsExport::FromFlags("trainer 0"));
//   ... train ...
//   // the destructor writes --metrics_file
//
// Thread-safety: owned by the command's main thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/metrics/metrics_server.h"

namespace oar::cli {

class MetricsExport {
 public:
  // Starts the server when --metrics_port > 0 and says where on stderr
  // ("<who>: metrics at http://host:port/metrics"); adds the process_*
  // gauges. Errors name the address that could not be bound.
  static absl::StatusOr<std::unique_ptr<MetricsExport>> FromFlags(const std::string& who);
  // Serves on for --metrics_linger_s (blocking), stops the server, and
  // writes --metrics_file (to a temporary name, then renamed), if given.
  ~MetricsExport();

 private:
  std::unique_ptr<metrics::MetricsServer> server_;
  std::string who_;
};

}  // namespace oar::cli
