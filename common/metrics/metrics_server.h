// MetricsServer: serves a Registry over HTTP with Boost.Beast, as
// Prometheus scrapes it: GET /metrics answers the text exposition format
// (Content-Type text/plain; version=0.0.4); GET / a one-line pointer to it;
// anything else 404 (or 405 for other methods).
//
//   OAR_ASSIGN_OR_RETURN(auto server, metrics::MetricsServer::Create({.host = "127.0.0.1", .port = 9100}));
//   server->port();  // the bound port (port 0 picks a free one)
//
// One thread runs Asio's context: it accepts and answers connections
// asynchronously, one request each; a client that stalls is cut off after
// Options::io_timeout. States: serving from Create until the destructor,
// which stops the context and joins the thread (it never waits on a
// client).
//
// Thread-safety: port() and endpoint() are safe from any thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"

namespace oar::metrics {

class MetricsServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";                // the address to bind ("0.0.0.0": every interface)
    int port = 0;                                  // 0: a free port
    Registry* registry = nullptr;                  // null: Default()
    absl::Duration io_timeout = absl::Seconds(5);  // per connection: read the request, write the answer
  };

  // Binds and starts serving; an error names host:port when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Create(const Options& options);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const;
  std::string endpoint() const;  // host:port

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace oar::metrics
