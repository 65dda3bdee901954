#include "pserver/pserver_runtime.h"

#include "common/base/status.h"
#include "common/framework/executor.h"
#include "common/rpc/transport_select.h"
#include "pserver/pserver_metrics.h"
#include "pserver/sparse_tables.h"

namespace oar {

absl::Status RunPserver(const ProgramDesc& main, const ProgramDesc& startup, const std::string& checkpoint_dir,
                        const PserverInit& init, Profiler* profiler) {
  std::unique_ptr<rpc::Transport> transport = rpc::MakeTransport();  // --rpc_transport
  RunEnv env;
  env.transport = transport.get();
  Executor exe(CPUPlace(), ExecutorOptions{.env = &env});
  Scope scope;
  OAR_RETURN_IF_ERROR(PrepareSparseTables(main, &scope).status());  // before the startup initializes them
  OAR_RETURN_IF_ERROR(Annotate(exe.Run(startup, &scope).status(), "pserver startup program"));
  if (init) OAR_RETURN_IF_ERROR(init(exe, &scope));
  GetPserverMetrics().parameter_bytes->Set(PersistableBytes(main, scope));
  env.profiler = profiler;  // the serving, not the startup
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
