#include "cli/metrics_export.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/metrics/process_metrics.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DEFINE_int32(metrics_port, 0, "serve Prometheus metrics over HTTP on this port at /metrics (0: off)");
DEFINE_string(metrics_host, "127.0.0.1", "with --metrics_port: the address to serve on (0.0.0.0: every interface)");
DEFINE_string(metrics_file, "", "write the metrics in Prometheus' text format to this file when the process ends");
DEFINE_double(metrics_linger_s, 0,
              "with --metrics_port: keep serving the final metrics this many seconds after the work ends, so a "
              "scrape sees the totals");

namespace oar::cli {

absl::StatusOr<std::unique_ptr<MetricsExport>> MetricsExport::FromFlags(const std::string& who) {
  auto e = std::unique_ptr<MetricsExport>(new MetricsExport());
  e->who_ = who;
  if (FLAGS_metrics_port < 0 || FLAGS_metrics_port > 65535) {
    return absl::InvalidArgumentError("--metrics_port " + std::to_string(FLAGS_metrics_port) + " is not a port");
  }
  if (FLAGS_metrics_port == 0 && FLAGS_metrics_file.empty()) return e;
  metrics::AddProcessMetrics(&metrics::Default());
  if (FLAGS_metrics_port > 0) {
    auto server = metrics::MetricsServer::Create({.host = FLAGS_metrics_host, .port = FLAGS_metrics_port});
    if (!server.ok()) return server.status();
    e->server_ = std::move(*server);
    std::fprintf(stderr, "%s: metrics at http://%s/metrics\n", who.c_str(), e->server_->endpoint().c_str());
  }
  return e;
}

MetricsExport::~MetricsExport() {
  if (server_ != nullptr && FLAGS_metrics_linger_s > 0) {
    std::fprintf(stderr, "%s: serving the final metrics for %g s more (--metrics_linger_s)\n", who_.c_str(),
                 FLAGS_metrics_linger_s);
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(FLAGS_metrics_linger_s, 3600.0)));
  }
  server_.reset();
  if (FLAGS_metrics_file.empty()) return;
  const std::string tmp = FLAGS_metrics_file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << metrics::Default().Render();
    if (!out) {
      LOG(WARNING) << who_ << ": cannot write --metrics_file " << tmp;
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, FLAGS_metrics_file, ec);
  if (ec) LOG(WARNING) << who_ << ": cannot rename " << tmp << " to " << FLAGS_metrics_file << ": " << ec.message();
}

}  // namespace oar::cli
