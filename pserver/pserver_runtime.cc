#include "pserver/pserver_runtime.h"

#include "common/executor.h"
#include "common/rpc/grpc_transport.h"
#include "common/status.h"

namespace oar {

absl::Status RunPserver(const ProgramDesc& main, const ProgramDesc& startup) {
  rpc::GrpcTransport grpc;
  RunEnv env;
  env.transport = &grpc;
  Executor exe(CPUPlace(), ExecutorOptions{.env = &env});
  Scope scope;
  OAR_RETURN_IF_ERROR(Annotate(exe.Run(startup, &scope).status(), "pserver startup program"));
  return exe.Run(main, &scope).status();
}

}  // namespace oar
