// GrpcServer: Fluid's SendRecvService over gRPC's callback generic API, the
// serving half of GrpcTransport (grpc_transport.h). Each call's request is
// parsed and checked (var_serde.h) and handed to the handler on the thread
// pool of its kind (ServerOptions::send_threads, ...), or run on gRPC's own
// thread when the handler says that kind never blocks. The handler's error
// goes back to the caller as the gRPC status. SendVariable requests are read
// only while a ReadGate (read_gate.h) has a slot: at most
// max_inflight_request_bytes / the largest request of them are held at once,
// the rest wait unread. A request the handler defers (Defers,
// TryHandleDeferred: a sync pserver's early Get) is offered to it on gRPC's
// thread first and answered whenever the handler responds, holding no pool
// thread meanwhile.
//
// Refused before the handler sees them: a request that does not parse
// (INVALID_ARGUMENT), a call without the auth token when one is set
// (UNAUTHENTICATED), a request larger than the server's message cap
// (RESOURCE_EXHAUSTED, by gRPC, unread), and a request that finds
// max_queued_requests of its kind already waiting for a thread
// (RESOURCE_EXHAUSTED naming the limit; clients back off and retry).
//
// Shutdown order (Shutdown or the destructor): the owner first releases the
// handler's waits, then gRPC stops accepting and cancels in-flight calls at a
// short deadline while the pools still run → pools drain and join.
//
// Thread-safety: Start/Shutdown from the owner; the handler is called
// concurrently from the pools and gRPC's threads.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/transport.h"

namespace oar::rpc {

class GrpcServer final : public Listener {
 public:
  // Binds and starts serving — or serves the socket handed to the process
  // for the endpoint's port (common/base/listen_sockets.h; not with TLS);
  // Unavailable naming the endpoint when it cannot bind, NotFound naming
  // the flag when a TLS file cannot be read.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const ServerOptions& options, RpcHandler* handler);
  ~GrpcServer() override;
  int port() const { return port_; }
  const std::string& endpoint() const override { return endpoint_; }
  void Shutdown() override;

 private:
  class Impl;
  GrpcServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::string endpoint_;
};

}  // namespace oar::rpc
