#include "trainer/dist_ops.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/framework/selected_rows_util.h"
#include "common/metrics/metrics.h"
#include "common/ops/op_util.h"
#include "common/rpc/rpc_client.h"
#include "trainer/communicator.h"
#include "trainer/geo_communicator.h"
#include "trainer/stack_rows.h"

namespace oar {
namespace {

using rpc::RpcCall;
using rpc::RpcClient;
using rpc::WaitAll;

// The RPC client of the runtime running the op.
absl::StatusOr<RpcClient*> Client(const ExecutionContext& ctx) {
  if (ctx.env() == nullptr || ctx.env()->rpc == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        ctx.op().type, ": no RPC client; run this program with an executor given a RunEnv (a trainer runtime)"));
  }
  return ctx.env()->rpc;
}

// With sync_mode (the default) the op waits for its calls; without, they
// are left pending for the trainer's next barrier (sync training, where the
// transpiler sets sync_mode false on send and recv, as Fluid 1.x does).
absl::Status WaitOrDefer(const ExecutionContext& ctx, RpcClient* client, std::vector<std::shared_ptr<RpcCall>>& calls,
                         int64_t tid) {
  if (ctx.Attr<bool>("sync_mode")) return WaitAll(calls);
  for (auto& c : calls) client->AddPending(tid, std::move(c));
  return absl::OkStatus();
}

absl::Status CheckSameLength(const ExecutionContext& ctx, size_t n, const std::string& attr, size_t m) {
  if (n == m) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", n, " variables but ", m, " entries in ", attr));
}

// Every dense payload may be lent (SendOptions::lend_payload): a trainer
// sends a variable once a step, and a pserver that takes the loan (a sync
// one) is done with it before the trainer's next step.
absl::Status SendKernel(const ExecutionContext& ctx) {
  const auto& names = ctx.op().Input("X");
  const auto send_varnames = ctx.Attr<std::vector<std::string>>("send_varnames");
  if (send_varnames == std::vector<std::string>{"param_init"}) {
    return absl::OkStatus();  // GEO-SGD's startup: its communicator snapshots the parameters when it starts
  }
  if (ctx.env() != nullptr && ctx.env()->geo != nullptr) {  // GEO-SGD: a step; the ids of the sparse tables
    OAR_RETURN_IF_ERROR(CheckSameLength(ctx, names.size(), "send_varnames", send_varnames.size()));
    std::map<std::string, const Tensor*> ids;
    for (size_t i = 0; i < names.size(); ++i) {
      const Variable* v = ctx.InputVar("X", i);
      ids[send_varnames[i]] = v != nullptr && v->IsType<Tensor>() ? &v->Get<Tensor>() : nullptr;
    }
    return ctx.env()->geo->Step(ids);
  }
  if (ctx.env() != nullptr && ctx.env()->communicator != nullptr) {  // queued; sent merged, in the background
    for (size_t i = 0; i < names.size(); ++i) {
      const Variable* v = ctx.InputVar("X", i);
      if (v == nullptr || !v->IsInitialized()) {
        return absl::FailedPreconditionError(absl::StrCat("send: '", names[i], "' has no value"));
      }
      OAR_RETURN_IF_ERROR(ctx.env()->communicator->Send(names[i], *v));
    }
    return absl::OkStatus();
  }
  const auto epmap = ctx.Attr<std::vector<std::string>>("epmap");
  const int64_t tid = ctx.Attr<int32_t>("trainer_id");
  OAR_ASSIGN_OR_RETURN(RpcClient * client, Client(ctx));
  std::vector<std::shared_ptr<RpcCall>> calls;
  if (!send_varnames.empty()) {  // runtime split: rows of X[0] by `sections`
    OAR_RETURN_IF_ERROR(CheckSameLength(ctx, send_varnames.size(), "epmap", epmap.size()));
    const auto sections = ctx.Attr<std::vector<int32_t>>("sections");
    OAR_RETURN_IF_ERROR(CheckSameLength(ctx, send_varnames.size(), "sections", sections.size()));
    const Variable* xv = ctx.InputVar("X", 0);
    if (xv == nullptr || !xv->IsInitialized()) {
      return absl::FailedPreconditionError(absl::StrCat("send: '", names[0], "' has no value"));
    }
    OAR_ASSIGN_OR_RETURN(std::vector<Variable> parts,
                         SplitByRows(*xv, std::vector<int64_t>(sections.begin(), sections.end()),
                                     absl::StrCat("send: '", names[0], "'")));
    for (size_t i = 0; i < parts.size(); ++i) {
      calls.push_back(
          client->AsyncSendVar(epmap[i], send_varnames[i], &parts[i], {.trainer_id = tid, .lend_payload = true}));
    }
    return WaitAll(calls);
  }
  OAR_RETURN_IF_ERROR(CheckSameLength(ctx, names.size(), "epmap", epmap.size()));
  for (size_t i = 0; i < names.size(); ++i) {
    const Variable* v = ctx.InputVar("X", i);
    if (v == nullptr || !v->IsInitialized()) {
      return absl::FailedPreconditionError(absl::StrCat("send: '", names[i], "' has no value"));
    }
    calls.push_back(client->AsyncSendVar(epmap[i], names[i], v, {.trainer_id = tid, .lend_payload = true}));
  }
  return WaitOrDefer(ctx, client, calls, tid);  // the variables must not change while in flight
}

// Runtime split: the blocks `remote[i]` from `epmap[i]`, stacked by rows
// into `out`. The blocks are read here and dropped: a block a pserver lends
// is read where it lies (AsyncGetView), and copied once, into `out`.
absl::Status RecvAndConcat(const ExecutionContext& ctx, RpcClient* client, const std::vector<std::string>& epmap,
                           const std::vector<std::string>& remote, int64_t tid) {
  std::vector<Variable> parts(remote.size());
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (size_t i = 0; i < remote.size(); ++i) calls.push_back(client->AsyncGetView(epmap[i], remote[i], &parts[i], tid));
  OAR_RETURN_IF_ERROR(WaitAll(calls));
  return StackRows(parts, remote, epmap, ctx.Output("Out", 0));
}

// Whether recv's output `out` is a slice of a parameter (`w.block0`, which
// concat joins into the parameter in this step): not the parameter the
// op's op_role_var names, and declared non-persistable in the program's
// global block, as the transpiler declares its slices. A slice may arrive as
// a view of what the pserver lends (RpcClient::AsyncGetView); anything
// that lives on across steps is copied.
bool IsSlice(const ExecutionContext& ctx, const std::vector<std::string>& role_var, const std::string& out) {
  if (role_var.empty() || out == role_var[0] || ctx.runner() == nullptr) return false;
  const VarDesc* v = ctx.runner()->program().Block(0).FindVar(out);
  return v != nullptr && !v->persistable;
}

absl::Status RecvKernel(const ExecutionContext& ctx) {
  const auto& outs = ctx.op().Output("Out");
  if (ctx.env() != nullptr && ctx.env()->communicator != nullptr) {  // what its recv thread pulled last, if new
    for (size_t i = 0; i < outs.size(); ++i) {
      OAR_RETURN_IF_ERROR(ctx.env()->communicator->TakeReceived(outs[i], ctx.OutputVar("Out", i)));
    }
    return absl::OkStatus();
  }
  if (ctx.op().GetAttr<bool>("do_not_run", false)) return absl::OkStatus();  // a communicator's program, run without
  const auto epmap = ctx.Attr<std::vector<std::string>>("epmap");
  const int64_t tid = ctx.Attr<int32_t>("trainer_id");
  OAR_ASSIGN_OR_RETURN(RpcClient * client, Client(ctx));
  auto varnames = ctx.Attr<std::vector<std::string>>("recv_varnames");
  if (varnames.empty()) varnames = ctx.Attr<std::vector<std::string>>("varnames");
  if (outs.size() == 1 && varnames.size() > 1) {
    OAR_RETURN_IF_ERROR(CheckSameLength(ctx, varnames.size(), "epmap", epmap.size()));
    return RecvAndConcat(ctx, client, epmap, varnames, tid);
  }
  OAR_RETURN_IF_ERROR(CheckSameLength(ctx, outs.size(), "epmap", epmap.size()));
  if (varnames.empty()) varnames = outs;
  OAR_RETURN_IF_ERROR(CheckSameLength(ctx, outs.size(), "recv_varnames", varnames.size()));
  const auto role_var = ctx.op().GetAttr<std::vector<std::string>>(kOpRoleVarAttr);
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (size_t i = 0; i < outs.size(); ++i) {
    Variable* out = ctx.OutputVar("Out", i);
    calls.push_back(IsSlice(ctx, role_var, outs[i]) ? client->AsyncGetView(epmap[i], varnames[i], out, tid)
                                                    : client->AsyncGetVar(epmap[i], varnames[i], out, tid));
  }
  return WaitOrDefer(ctx, client, calls, tid);  // a deferred Out is ready after the fetch barrier
}

// prefetch(X...) -> Out...: the rows of ids X[i] from the pserver epmap[i]
// (its prefetch block for X[i]'s name computes Out[i]'s name). An empty
// X[i] is not sent; its Out[i] is left empty.
absl::Status PrefetchKernel(const ExecutionContext& ctx) {
  const auto& ins = ctx.op().Input("X");
  const auto& outs = ctx.op().Output("Out");
  const auto epmap = ctx.Attr<std::vector<std::string>>("epmap");
  const int64_t tid = ctx.Attr<int32_t>("trainer_id");
  OAR_RETURN_IF_ERROR(CheckSameLength(ctx, ins.size(), "epmap", epmap.size()));
  OAR_RETURN_IF_ERROR(CheckSameLength(ctx, ins.size(), "Out", outs.size()));
  OAR_ASSIGN_OR_RETURN(RpcClient * client, Client(ctx));
  const std::string table = ctx.Attr<std::string>("table_name");
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (size_t i = 0; i < ins.size(); ++i) {
    OAR_ASSIGN_OR_RETURN(const Tensor* ids, RequireInput(ctx, "X", i));
    if (ids->numel() == 0) {
      ctx.Output("Out", i)->mutable_data<float>(DDim{0, 0});
      continue;
    }
    calls.push_back(
        client->AsyncPrefetchVar(epmap[i], ins[i], outs[i], ctx.InputVar("X", i), table, ctx.OutputVar("Out", i), tid));
  }
  return WaitAll(calls);
}

template <bool kBatch>
absl::Status BarrierKernel(const ExecutionContext& ctx) {
  const int64_t tid = ctx.Attr<int32_t>("trainer_id");
  if (kBatch && ctx.op().GetAttr<bool>("half_async", false)) {  // Fluid 1.7+: the trainer's threads meet
    if (ctx.env() == nullptr || ctx.env()->communicator == nullptr) {
      return absl::FailedPreconditionError(
          "send_barrier(half_async=true) meets the trainer's threads in its communicator, and this trainer has none: "
          "run the program as a half-async job (oar run --half_async)");
    }
    return ctx.env()->communicator->Barrier();
  }
  OAR_ASSIGN_OR_RETURN(RpcClient * client, Client(ctx));
  if (kBatch) return client->SendBatchBarriers(tid, ctx.Attr<std::vector<std::string>>("endpoints"));
  OAR_RETURN_IF_ERROR(client->WaitPending(tid));  // this trainer's recvs first
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (const auto& ep : ctx.Attr<std::vector<std::string>>("endpoints")) {
    calls.push_back(client->AsyncSendFetchBarrier(ep, tid));
  }
  return WaitAll(calls);
}

absl::Status CheckpointNotifyKernel(const ExecutionContext& ctx) {
  const std::string dir = ctx.Attr<std::string>("dir");
  const int64_t tid = ctx.Attr<int32_t>("trainer_id");
  OAR_ASSIGN_OR_RETURN(RpcClient * client, Client(ctx));
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (const auto& ep : ctx.Attr<std::vector<std::string>>("epmap")) {
    calls.push_back(client->AsyncCheckpointNotify(ep, dir, tid));
  }
  return WaitAll(calls);
}

// The wall time a trainer spends in its RPC ops, by op type
// (oar_trainer_rpc_op_seconds_total{op}): what `oar launch` splits each
// trainer's step time into (send, barrier wait, receive; the rest compute).
template <absl::Status (*Kernel)(const ExecutionContext&)>
absl::Status Timed(const ExecutionContext& ctx) {
  static metrics::Family<metrics::Counter>* seconds = metrics::Default().AddCounter(
      "oar_trainer_rpc_op_seconds_total", "Wall time in a trainer's RPC ops (send, recv, barriers)", {"op"});
  const absl::Time start = absl::Now();
  absl::Status s = Kernel(ctx);
  seconds->With({ctx.op().type})->Add(absl::ToDoubleSeconds(absl::Now() - start));
  return s;
}

}  // namespace

void RegisterDistOps(OpRegistry* r) {
  RegisterSplitOps(r);
  r->Register("send")
      .HostSide()
      .Input("X", kDuplicable | kDispensable)  // GEO-SGD's startup sends param_init, which has no value
      .Output("Out", kDuplicable | kDispensable)
      .Attr("epmap", std::vector<std::string>{})
      .Attr("send_varnames", std::vector<std::string>{})
      .Attr("sections", std::vector<int32_t>{})
      .Attr("trainer_id", int32_t{0})
      .Attr("sync_mode", true)
      .Attr("merge_add", false)  // Fluid 1.7+: the communicator sums (else by is_sgd_optimizer)
      .Attr("use_send_handler", true)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(Timed<SendKernel>);
  r->Register("recv")
      .HostSide()
      .Input("X", kDuplicable | kDispensable)
      .Output("Out", kDuplicable)
      .Attr("epmap", std::vector<std::string>{})
      .Attr("varnames", std::vector<std::string>{})
      .Attr("recv_varnames", std::vector<std::string>{})
      .Attr("trainer_id", int32_t{0})
      .Attr("sync_mode", true)
      .Attr("do_not_run", false)  // Fluid 1.7+: the communicator receives instead
      .Attr("with_barrier", true)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(Timed<RecvKernel>);
  r->Register("send_barrier")
      .HostSide()
      .Input("X", kDuplicable | kDispensable)
      .Output("Out", kDuplicable | kDispensable)
      .Attr("endpoints", std::vector<std::string>{})
      .Attr("trainer_id", int32_t{0})
      .Attr("sync_mode", true)
      .Attr("half_async", false)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(Timed<BarrierKernel<true>>);
  r->Register("fetch_barrier")
      .HostSide()
      .Input("X", kDuplicable | kDispensable)
      .Output("Out", kDuplicable | kDispensable)
      .Attr("endpoints", std::vector<std::string>{})
      .Attr("trainer_id", int32_t{0})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(Timed<BarrierKernel<false>>);
  r->Register("prefetch")
      .HostSide()
      .Input("X", kDuplicable)
      .Output("Out", kDuplicable)
      .Attr("epmap", std::vector<std::string>{})
      .Attr("trainer_id", int32_t{0})
      .Attr("table_name", std::string())
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(Timed<PrefetchKernel>);
  r->Register("checkpoint_notify")
      .HostSide()
      .Attr("epmap", std::vector<std::string>{})
      .Attr("dir", std::string())
      .Attr("lookup_table", std::string())
      .Attr("trainer_id", int32_t{0})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(CheckpointNotifyKernel);
}

}  // namespace oar
