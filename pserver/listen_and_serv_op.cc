// listen_and_serv: the op that is a pserver program's block 0. It runs a
// ParameterServer over the op's scope and program, serving through the
// executor's RunEnv transport (one with default RpcOptions when none is
// given; its options set the server's threads, bounds, TLS and deadline),
// until every trainer
// has completed, SIGTERM/SIGINT, or an error. With Oar's attribute
// `oar_checkpoint_dir` (set by the pserver runtime from --checkpoint_dir)
// and a checkpoint in <dir>/pserver_<id>, it first restores from it and
// resumes the job (a restarted pserver). Fluid's attributes: endpoint,
// Fanin, optimize_blocks, grad_to_block_id, sync_mode, distributed_mode
// (0 sync, 1 async), lr_decay_block_id, checkpint_block_id (Fluid's
// spelling), pserver_id. The bound endpoint goes to the log and to the
// RunEnv's on_serving (the runtime writes --pserver_port_file there).
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <filesystem>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/framework/executor.h"
#include "common/framework/op_registry.h"
#include "common/framework/tensor_io.h"
#include "common/ops/op_util.h"
#include "common/rpc/transport_select.h"
#include "glog/logging.h"
#include "pserver/parameter_server.h"
#include "pserver/pserver_ops.h"
#include "pserver/sparse_tables.h"

namespace oar {
namespace {

absl::Status ListenAndServKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(PserverConfig config, ListenAndServConfig(ctx.op()));
  if (ctx.runner() == nullptr) return absl::FailedPreconditionError("listen_and_serv needs its program");
  // The runtime's transport, or one of the default options.
  std::unique_ptr<rpc::Transport> own;
  config.transport = ctx.env() != nullptr ? ctx.env()->transport : nullptr;
  config.profiler = ctx.env() != nullptr ? ctx.env()->profiler : nullptr;
  if (ctx.env() != nullptr) {
    config.trainer_members = ctx.env()->trainer_members;
    config.agree_on_leave = ctx.env()->agree_on_leave;
  }
  if (config.transport == nullptr) {
    OAR_ASSIGN_OR_RETURN(own, rpc::MakeTransport(rpc::RpcOptions{}));
    config.transport = own.get();
  }
  config.server = rpc::ServeOptions(config.transport->options(), config.endpoint);
  // The Executor gives ops a local scope; the persistables (what the
  // pserver updates, serves and checkpoints) live in an ancestor of it.
  Scope* scope = ctx.scope();
  const ProgramDesc& program = ctx.runner()->program();
  for (const auto& [name, v] : program.Block(0).vars()) {
    if (!v.persistable) continue;
    while (scope->FindLocalVar(name) == nullptr && scope->parent() != nullptr) {
      scope = const_cast<Scope*>(scope->parent());
    }
    break;
  }
  // A restart: this pserver's last checkpoint, when there is one.
  const std::string dir = ctx.Attr<std::string>("oar_checkpoint_dir");
  if (!dir.empty()) {
    const std::string own = PserverCheckpointDir(dir, config.pserver_id);
    if (std::filesystem::exists(own + "/__manifest__")) {
      Executor exe;
      auto step = LoadPserverCheckpoint(exe, scope, own, program, config);
      if (!step.ok())
        return Annotate(step.status(), absl::StrCat("restoring pserver ", config.pserver_id, " from ", own));
      config.restored = true;
      config.restored_step = *step;
      LOG(INFO) << "pserver " << config.pserver_id << ": restored from " << own << " (step " << *step
                << "): the job goes on from there (give another --checkpoint_dir to start afresh)";
    }
  }
  for (const auto& table : DistributedTables(program)) {
    const Variable* v = scope->FindVar(table);
    if (v == nullptr || !v->IsType<SparseTable>()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "listen_and_serv: the distributed table '", table, "' is not a sparse table in the pserver's scope; ",
          "call PrepareSparseTables(pserver_program, scope) before running the startup program (RunPserver does)"));
    }
  }
  OAR_ASSIGN_OR_RETURN(auto ps, ParameterServer::Create(config, program, scope, ctx.place()));
  // SIGTERM/SIGINT: finish the step in progress, then return cleanly (a stop
  // before Run makes Run return at once). Handled from before the server
  // listens and says its port, so a supervisor that stops the pserver as
  // soon as it is ready never meets the default disposition. Asio delivers
  // the signal to a handler on its own thread (no polling); the set's
  // destruction removes the registration (the disposition goes back to the
  // default once no set in the process waits for it).
  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  const std::string name = absl::StrCat("pserver ", config.pserver_id);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;  // cancelled: Run returned first
    LOG(INFO) << name << ": signal " << signo << " received, stopping after the current step";
    ps->Stop();
  });
  std::thread watcher([&io] { io.run(); });
  absl::Cleanup stop_watching = [&] {
    boost::system::error_code ignored;
    signals.cancel(ignored);
    io.stop();
    watcher.join();
  };
  OAR_ASSIGN_OR_RETURN(std::string bound, ps->Start());
  LOG(INFO) << name << " serving on " << bound << " (" << config.fanin << " trainers, "
            << (config.sync_mode ? "sync" : "async") << ")";
  if (ctx.env() != nullptr && ctx.env()->on_serving) OAR_RETURN_IF_ERROR(ctx.env()->on_serving(bound));
  absl::Status s = ps->Run();
  std::move(stop_watching).Invoke();
  ps.reset();  // shuts the RPC server down
  if (s.ok()) LOG(INFO) << "pserver " << bound << " done";
  return s;
}

}  // namespace

absl::StatusOr<PserverConfig> ListenAndServConfig(const OpDesc& op) {
  if (op.type != "listen_and_serv") {
    return absl::InvalidArgumentError(absl::StrCat("expected a listen_and_serv op, got '", op.type, "'"));
  }
  PserverConfig config;
  config.endpoint = op.GetAttr<std::string>("endpoint", "127.0.0.1:6164");
  config.fanin = op.GetAttr<int32_t>("Fanin", 1);
  const int mode = op.GetAttr<int32_t>("distributed_mode", 0);
  config.sync_mode = op.GetAttr<bool>("sync_mode", true) && mode == 0;
  // 1 async, 2 half-async (Fluid 1.8 writes it for async without runtime
  // split), 3 GEO-SGD (its blocks add the trainers' deltas): each applies a
  // received variable's block at once.
  if (mode < 0 || mode > 3) {
    return absl::InvalidArgumentError(absl::StrCat("listen_and_serv: distributed_mode ", mode,
                                                   " is none of Fluid's (0 sync, 1 async, 2 half-async, 3 geo)"));
  }
  config.optimize_blocks = op.GetAttr<BlockRefs>("optimize_blocks", BlockRefs{}).idx;
  OAR_ASSIGN_OR_RETURN(config.grad_to_block_id,
                       ParseGradToBlockId(op.GetAttr<std::vector<std::string>>("grad_to_block_id", {})));
  config.lr_decay_block_id = op.GetAttr<int32_t>("lr_decay_block_id", -1);
  // Fluid lists the LR-decay block first among the optimize blocks; it runs
  // once per step before them, so the config keeps it apart.
  std::erase(config.optimize_blocks, config.lr_decay_block_id);
  OAR_ASSIGN_OR_RETURN(config.prefetch_var_to_block_id,
                       ParseGradToBlockId(op.GetAttr<std::vector<std::string>>("prefetch_var_name_to_block_id", {})));
  config.pserver_id = op.GetAttr<int32_t>("pserver_id", 0);
  return config;
}

void RegisterPserverOps(OpRegistry* r) {
  r->Register("listen_and_serv")
      .HostSide()
      .Input("X", kDuplicable | kDispensable)
      .Attr("endpoint", std::string("127.0.0.1:6164"))
      .Attr("Fanin", int32_t{1})
      .Attr("optimize_blocks", BlockRefs{})
      .Attr("grad_to_block_id", std::vector<std::string>{})
      .Attr("prefetch_var_name_to_block_id", std::vector<std::string>{})
      .Attr("sync_mode", true)
      .Attr("distributed_mode", int32_t{0})
      .Attr("lr_decay_block_id", int32_t{-1})
      .Attr("checkpint_block_id", int32_t{-1})
      .Attr("pserver_id", int32_t{0})
      .Attr("dc_asgd", false)
      .Attr("rpc_get_thread_num", int32_t{12})
      .Attr("rpc_send_thread_num", int32_t{12})
      .Attr("rpc_prefetch_thread_num", int32_t{12})
      .Attr("oar_checkpoint_dir", std::string())
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(ListenAndServKernel);
}

}  // namespace oar
