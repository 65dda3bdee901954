// InProcessTransport: a Transport whose servers and clients live in one
// process — a pserver object and its trainers on threads, with no sockets —
// for fast tests of the whole pserver path (the same handlers, checks,
// sequence numbers and retries as over gRPC). Listen registers a handler
// under its endpoint (port 0 picks an unused pseudo-port); a Call runs the
// handler on that listener's pool of its kind, bounded as GrpcServer bounds
// its queues, and ends with the handler's answer or DEADLINE_EXCEEDED at the
// call's deadline. A call to an endpoint nobody serves fails UNAVAILABLE, as
// a refused connection does. Payloads are read straight from the sender's
// tensors (which the OutgoingMessage keeps alive), replies from the served
// ones.
//
//   InProcessTransport net;
//   ParameterServer ps(..., &net);            // Listen("127.0.0.1:0")
//   RpcClient client(&net);                   // calls reach ps directly
//
// Thread-safety: safe for concurrent use. Destroy the listeners before the
// transport.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/rpc/timer.h"
#include "common/rpc/transport.h"

namespace oar::rpc {

class InProcessTransport final : public Transport {
 public:
  explicit InProcessTransport(RpcOptions options = {});
  ~InProcessTransport() override;

  std::string Name() const override { return "in-process"; }
  void Call(RpcKind kind, const std::string& ep, std::shared_ptr<const OutgoingMessage> request, absl::Time deadline,
            CallDone done) override;
  absl::Status WaitReady(const std::string& ep, absl::Time deadline) override;
  absl::StatusOr<std::unique_ptr<Listener>> Listen(const ServerOptions& options, RpcHandler* handler) override;
  // What the peers of a crashed server see: new calls to `ep` are refused
  // and the answers of calls in progress are lost (UNAVAILABLE). The
  // listener still has to be destroyed by its owner.
  void Disconnect(const std::string& ep);

 private:
  class Server;
  void Remove(const std::string& endpoint, const Listener* server);

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Server>> servers_ ABSL_GUARDED_BY(mu_);
  int next_port_ ABSL_GUARDED_BY(mu_) = 40000;
  Timer timer_;
};

}  // namespace oar::rpc
