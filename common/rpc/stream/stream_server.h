// StreamServer: the serving half of Oar's stream transports — a Boost.Asio
// TCP acceptor on the endpoint's host (a port of its own; TLS on every
// connection when the options carry a certificate) and, when asked and
// without TLS,
// an abstract Unix socket through which same-host clients hand over shared-
// memory rings (shm_stream.h). Each connection gets a reader thread: it
// checks the handshake (auth token), then reads request frames (wire.h),
// checks each header against the handler's size cap before allocating,
// holds gradient payloads to the ReadGate's in-flight budget, reads the
// payload straight into a pooled tensor buffer and hands the request to the
// handler on the pool of its kind (HandlerPools, bounded as GrpcServer's)
// or inline when the handler says that kind never blocks. Replies are
// written by the thread that served them, the tensor read in place.
//
// Refused, answered with an error frame while the connection goes on: a
// header that does not parse or check (INVALID_ARGUMENT), a request over
// the cap (RESOURCE_EXHAUSTED, payload skipped unread into memory), a full
// queue (RESOURCE_EXHAUSTED), a request whose caller's deadline passed
// while it waited (DEADLINE_EXCEEDED). A wrong token ends the connection
// after telling the client (UNAUTHENTICATED); a frame whose framing is
// broken ends it with a warning naming the peer.
//
// Shutdown order (Shutdown or the destructor): the owner first releases
// the handler's waits → acceptors close → requests being served answer
// (up to 1 s, as gRPC's Shutdown grants) → every connection's stream closes
// (readers wake and leave) → readers join → pools drain and join.
//
// Thread-safety: Start/Shutdown from the owner; the handler is called
// concurrently from readers and pools.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/transport.h"

namespace oar::rpc::stream {

class StreamServer final : public Listener {
 public:
  // Listens on options.endpoint's host, any free port, for TCP; and, with
  // `shm`, on an abstract Unix socket named after this process and that
  // port. Unavailable naming the address when it cannot bind. `rpc`: the
  // connections' I/O timeout, shm and socket settings.
  static absl::StatusOr<std::unique_ptr<StreamServer>> Start(const ServerOptions& options, const RpcOptions& rpc,
                                                             RpcHandler* handler, bool shm);
  ~StreamServer() override;
  // host:port of the TCP acceptor.
  const std::string& endpoint() const override { return endpoint_; }
  int tcp_port() const { return tcp_port_; }
  // "@oar-stream-<pid>-<tcp port>", or "" without shm.
  const std::string& shm_name() const { return shm_name_; }
  // True when options carried a certificate: every TCP connection is TLS
  // (TlsStream) and no shared memory is offered.
  bool tls() const { return tls_; }
  void Shutdown() override;

 private:
  class Impl;
  StreamServer() = default;
  std::unique_ptr<Impl> impl_;
  std::string endpoint_, shm_name_;
  int tcp_port_ = 0;
  bool tls_ = false;
};

}  // namespace oar::rpc::stream
