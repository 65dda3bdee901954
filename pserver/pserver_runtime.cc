#include "pserver/pserver_runtime.h"

#include "common/base/status.h"
#include "common/framework/executor.h"
#include "common/framework/tensor_io.h"
#include "common/rpc/transport_select.h"
#include "pserver/pserver_metrics.h"
#include "pserver/sparse_tables.h"

namespace oar {

absl::Status RunPserver(const ProgramDesc& main, const ProgramDesc& startup, const PserverRunOptions& options) {
  OAR_ASSIGN_OR_RETURN(std::unique_ptr<rpc::Transport> transport, rpc::MakeTransport(options.rpc));
  RunEnv env;
  env.transport = transport.get();
  env.trainer_members = options.trainer_members;
  env.agree_on_leave = options.agree_on_leave;
  if (!options.port_file.empty()) {
    env.on_serving = [&options](const std::string& endpoint) {
      const std::string port = endpoint.substr(endpoint.rfind(':') + 1);
      return Annotate(WriteFileAtomically(options.port_file, port + "\n"), "--pserver_port_file");
    };
  }
  const std::string& checkpoint_dir = options.checkpoint_dir;
  const PserverInit& init = options.init;
  Executor exe(CPUPlace(), ExecutorOptions{.env = &env});
  Scope scope;
  OAR_RETURN_IF_ERROR(PrepareSparseTables(main, &scope).status());  // before the startup initializes them
  OAR_RETURN_IF_ERROR(Annotate(exe.Run(startup, &scope).status(), "pserver startup program"));
  if (init) OAR_RETURN_IF_ERROR(init(exe, &scope));
  GetPserverMetrics().parameter_bytes->Set(PersistableBytes(main, scope));
  env.profiler = options.profiler;  // the serving, not the startup
  ProgramDesc program(main);
  if (!checkpoint_dir.empty()) {
    BlockDesc* b = program.MutableBlock(0);
    for (size_t i = 0; i < b->OpSize(); ++i) {
      if (b->Op(i).type == "listen_and_serv") b->MutableOp(i)->SetAttr("oar_checkpoint_dir", checkpoint_dir);
    }
  }
  return exe.Run(program, &scope).status();
}

}  // namespace oar
