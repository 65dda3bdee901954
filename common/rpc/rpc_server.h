// RpcServer: Fluid's SendRecvService over gRPC's callback generic API. Each
// call's request is deserialized (var_serde.h) and handed to the handler on
// the thread pool of its kind (FLAGS_rpc_send_thread_num, ...), so a handler
// that waits (a Get waiting for the step's optimize) never blocks gRPC's own
// threads or the other kinds. The handler's error goes back to the caller as
// the gRPC status; a request that does not parse is answered
// INVALID_ARGUMENT without reaching the handler. With an auth token, calls
// without it are answered UNAUTHENTICATED.
//
// Shutdown order (Shutdown or the destructor): the owner first releases the
// handler's waits, then gRPC stops accepting and cancels in-flight calls at
// a short deadline while the pools still run → pools drain and join.
//
// Thread-safety: Start/Shutdown from the owner; the handler is called
// concurrently from the pools.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/var_serde.h"

namespace oar::rpc {

// What a handler answers: a variable (Get, Prefetch) or nothing.
struct Reply {
  std::string name;
  const Variable* var = nullptr;  // must stay valid until Handle's caller has serialized it
  Variable owned;                 // use this one for values made for the reply
};

class RpcHandler {
 public:
  virtual ~RpcHandler() = default;
  virtual absl::Status Handle(RpcKind kind, Received& request, Reply* reply) = 0;
  // A variable whose buffer the incoming payload may reuse (see SpareFn);
  // by default none.
  virtual Variable SpareBuffer(RpcKind /*kind*/, const sendrecv::VariableMessage& /*meta*/) { return {}; }
  // True when Handle for this kind never waits (no barrier, no long lock):
  // the server then runs it on gRPC's own thread, saving a thread hand-off
  // per call. By default every kind goes through its pool.
  virtual bool NeverBlocks(RpcKind /*kind*/) const { return false; }
};

struct ServerOptions {
  std::string endpoint;  // host:port; port 0 picks a free one; binds to host only
  int send_threads = 0, get_threads = 0, prefetch_threads = 0;  // 0: the flags
  std::string auth_token;                                       // "" : no check
  std::string tls_cert, tls_key;                                // PEM file paths; TLS when both set
};

class RpcServer {
 public:
  // Binds and starts serving; Unavailable naming the endpoint when it cannot
  // bind.
  static absl::StatusOr<std::unique_ptr<RpcServer>> Start(const ServerOptions& options, RpcHandler* handler);
  ~RpcServer();
  int port() const { return port_; }
  const std::string& endpoint() const { return endpoint_; }  // with the chosen port
  void Shutdown();

 private:
  class Impl;
  RpcServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::string endpoint_;
};

}  // namespace oar::rpc
