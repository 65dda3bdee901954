// A test trainer's network objects: a gRPC transport (or the one given), an
// RPC client over it and the RunEnv its executor hands to the RPC ops.
//
//   TrainerNet net;
//   Executor exe(CPUPlace(), net.options());
//
// Thread-safety: test-only; the client is safe for concurrent use.
#pragma once

#include <memory>

#include "common/framework/executor.h"
#include "common/rpc/grpc_transport.h"
#include "common/rpc/rpc_client.h"

namespace oar {

struct TrainerNet {
  explicit TrainerNet(rpc::Transport* transport = nullptr, rpc::ClientOptions o = {})
      : own(transport == nullptr ? std::make_unique<rpc::GrpcTransport>() : nullptr),
        client(transport != nullptr ? transport : own.get(), o),
        env(rpc::ClientEnv(&client)) {}
  ExecutorOptions options() const { return ExecutorOptions{.env = &env}; }

  std::unique_ptr<rpc::GrpcTransport> own;
  rpc::RpcClient client;
  RunEnv env;
};

}  // namespace oar
