// The process's transport, chosen by --rpc_transport (auto|grpc|tcp|shm):
// gRPC (Fluid's service) always serves and carries control; between two Oar
// processes tensors can instead travel over Oar's stream transports — a TCP
// stream (stream/tcp_stream.h) or, on one host, shared-memory rings
// (stream/shm_stream.h).
//
// Serving: Listen starts the gRPC server on the endpoint and, unless the
// mode is grpc, a StreamServer beside it (TLS when certificates are given,
// and then no shared memory); the gRPC service then answers a
// GetVariableNoBarrier of `kTransportOffer` itself with what the stream
// server offers ("tcp=41234 shm=@oar-stream-77-41234", "tcp=41234 tls").
//
// Calling: the first call to an endpoint asks it that question over gRPC
// and picks, per the mode — auto: shm when its socket is reachable (same
// host), else tcp, else gRPC (a Fluid or older Oar server answers with an
// error: gRPC); tcp / shm: that one or a clear error; grpc: no question.
// The choice is logged once per endpoint and kept while the stream
// connection can be (re)made; when it cannot (the server died; a restarted
// one offers another port), the next attempt asks again.
//
//   OAR_ASSIGN_OR_RETURN(auto transport, MakeTransport(options));   // RpcOptions
//   RpcClient client(transport.get());
//
// Thread-safety: safe for concurrent use.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/rpc/grpc_transport.h"
#include "common/rpc/stream/stream_client.h"
#include "common/rpc/transport.h"

namespace oar::rpc {

inline constexpr char kTransportOffer[] = "OAR_TRANSPORTS@RECV";

enum class TransportMode { kAuto, kGrpc, kTcp, kShm };
// "auto" → kAuto ...; InvalidArgument naming the flag and the choices.
absl::StatusOr<TransportMode> ParseTransportMode(const std::string& s);
const char* TransportModeName(TransportMode m);

class SelectingTransport final : public Transport {
 public:
  // `mode` rules; options.transport is not read.
  SelectingTransport(TransportMode mode, RpcOptions options = {});
  ~SelectingTransport() override;

  std::string Name() const override { return TransportModeName(mode_); }
  void Call(RpcKind kind, const std::string& ep, std::shared_ptr<const OutgoingMessage> request, absl::Time deadline,
            CallDone done) override;
  // Over a stream transport, the caller reads its reply itself (ClientConn).
  std::unique_ptr<ReplyReader> CallForWaiter(RpcKind kind, const std::string& ep,
                                             std::shared_ptr<const OutgoingMessage> request, absl::Time deadline,
                                             CallDone done) override;
  // Waits for the gRPC server, then settles (and connects) the data path.
  absl::Status WaitReady(const std::string& ep, absl::Time deadline) override;
  absl::StatusOr<std::unique_ptr<Listener>> Listen(const ServerOptions& options, RpcHandler* handler) override;

  // Its stream server offers shared memory (unless TLS is configured).
  bool LendsSharedMemory() const override { return mode_ == TransportMode::kAuto || mode_ == TransportMode::kShm; }
  // What calls to `ep` use: "grpc", "tcp", "shm"; "" before the first call.
  std::string ChosenFor(const std::string& ep);
  // A stream connection (tcp, shm) keeps order; gRPC does not.
  bool KeepsOrder(const std::string& ep) override {
    const std::string chosen = ChosenFor(ep);
    return chosen == "tcp" || chosen == "shm";
  }

 private:
  struct Choice {
    bool grpc = true;
    stream::Route route;
  };
  // The settled choice for `ep`, asking the server on first use. An error
  // only when it could not be settled (server not up yet: retryable) or
  // the mode cannot be honoured.
  absl::StatusOr<Choice> Choose(const std::string& ep, absl::Time deadline);
  absl::StatusOr<Choice> Negotiate(const std::string& ep, absl::Time deadline);

  const TransportMode mode_;
  const bool tls_;
  GrpcTransport grpc_;
  stream::StreamClient stream_;
  absl::Mutex mu_;
  std::map<std::string, Choice> chosen_ ABSL_GUARDED_BY(mu_);
};

// The transport options.transport names, configured by `options`;
// InvalidArgument for a mode it does not know.
absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const RpcOptions& options);

}  // namespace oar::rpc
