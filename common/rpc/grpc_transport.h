// GrpcTransport: the Transport over gRPC — Fluid's sendrecv.SendRecvService,
// so Fluid's own clients and servers speak with Oar's. One channel per
// endpoint (message size uncapped on the client, 16 MiB HTTP/2 frames), each
// call an async unary call through the generic stub with the auth token in
// its metadata; serving is GrpcServer (grpc_server.h).
//
//   GrpcTransport grpc(options);   // RpcOptions: auth token, TLS roots, deadline...
//   RpcClient client(&grpc);
//
// Thread-safety: safe for concurrent use.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/rpc/transport.h"

namespace grpc {
class Channel;
}

namespace oar::rpc {

class GrpcTransport final : public Transport {
 public:
  // options.auth_token is sent with every call when set; options.tls_ca
  // (a PEM root certificates file) makes every channel TLS when set.
  explicit GrpcTransport(RpcOptions options = {});
  ~GrpcTransport() override;

  std::string Name() const override { return "grpc"; }
  void Call(RpcKind kind, const std::string& ep, std::shared_ptr<const OutgoingMessage> request, absl::Time deadline,
            CallDone done) override;
  absl::Status WaitReady(const std::string& ep, absl::Time deadline) override;
  // A GrpcServer; options.auth_token and the TLS files as given.
  absl::StatusOr<std::unique_ptr<Listener>> Listen(const ServerOptions& options, RpcHandler* handler) override;

 private:
  // The channel to `ep`, made on first use; an unreadable --rpc_tls_ca is an
  // error, never a silent fall back to the system's roots.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Channel(const std::string& ep);

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oar::rpc
