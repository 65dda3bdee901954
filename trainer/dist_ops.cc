#include "trainer/dist_ops.h"

#include "absl/strings/str_cat.h"
#include "common/ops/op_util.h"
#include "common/rpc/rpc_client.h"
#include "common/status.h"

namespace oar {
namespace {

using rpc::RpcCall;
using rpc::RpcClient;

absl::Status WaitAll(std::vector<std::shared_ptr<RpcCall>>& calls) {
  absl::Status first;
  for (auto& c : calls) first.Update(c->Wait());
  return first;
}

absl::Status CheckSameLength(const ExecutionContext& ctx, size_t n, const std::string& attr, size_t m) {
  if (n == m) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", n, " variables but ", m, " entries in ", attr));
}

absl::Status SendKernel(const ExecutionContext& ctx) {
  const auto& names = ctx.op().Input("X");
  const auto epmap = ctx.Attr<std::vector<std::string>>("epmap");
  OAR_RETURN_IF_ERROR(CheckSameLength(ctx, names.size(), "epmap", epmap.size()));
  const int64_t tid = ctx.Attr<int32_t>("trainer_id");
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (size_t i = 0; i < names.size(); ++i) {
    const Variable* v = ctx.InputVar("X", i);
    if (v == nullptr || !v->IsInitialized()) {
      return absl::FailedPreconditionError(absl::StrCat("send: '", names[i], "' has no value"));
    }
    calls.push_back(RpcClient::Global()->AsyncSendVar(epmap[i], names[i], v, {.trainer_id = tid}));
  }
  return WaitAll(calls);  // the variables must not change while in flight
}

absl::Status RecvKernel(const ExecutionContext& ctx) {
  const auto& outs = ctx.op().Output("Out");
  const auto epmap = ctx.Attr<std::vector<std::string>>("epmap");
  auto varnames = ctx.Attr<std::vector<std::string>>("varnames");
  OAR_RETURN_IF_ERROR(CheckSameLength(ctx, outs.size(), "epmap", epmap.size()));
  if (varnames.empty()) varnames = outs;
  OAR_RETURN_IF_ERROR(CheckSameLength(ctx, outs.size(), "varnames", varnames.size()));
  const int64_t tid = ctx.Attr<int32_t>("trainer_id");
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (size_t i = 0; i < outs.size(); ++i) {
    calls.push_back(RpcClient::Global()->AsyncGetVar(epmap[i], varnames[i], ctx.OutputVar("Out", i), tid));
  }
  return WaitAll(calls);
}

template <bool kBatch>
absl::Status BarrierKernel(const ExecutionContext& ctx) {
  const int64_t tid = ctx.Attr<int32_t>("trainer_id");
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (const auto& ep : ctx.Attr<std::vector<std::string>>("endpoints")) {
    calls.push_back(kBatch ? RpcClient::Global()->AsyncSendBatchBarrier(ep, tid)
                           : RpcClient::Global()->AsyncSendFetchBarrier(ep, tid));
  }
  return WaitAll(calls);
}

absl::Status CheckpointNotifyKernel(const ExecutionContext& ctx) {
  const std::string dir = ctx.Attr<std::string>("dir");
  const int64_t tid = ctx.Attr<int32_t>("trainer_id");
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (const auto& ep : ctx.Attr<std::vector<std::string>>("epmap")) {
    calls.push_back(RpcClient::Global()->AsyncCheckpointNotify(ep, dir, tid));
  }
  return WaitAll(calls);
}

absl::Status SplitByrefInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  const auto sections = ctx.Attr<std::vector<int32_t>>("sections");
  if (sections.size() != ctx.OutputSize("Out")) {
    return ctx.Error(sections.size(), " sections for ", ctx.OutputSize("Out"), " outputs");
  }
  int64_t total = 0;
  for (size_t i = 0; i < sections.size(); ++i) {
    DDim d = x;
    d[0] = sections[i];
    total += sections[i];
    ctx.SetOutputDim("Out", d, i);
  }
  if (x[0] >= 0 && total != x[0]) return ctx.Error("sections add up to ", total, " rows, X has ", x[0]);
  return absl::OkStatus();
}

absl::Status SplitByrefKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const auto sections = ctx.Attr<std::vector<int32_t>>("sections");
  int64_t begin = 0;
  for (size_t i = 0; i < sections.size(); ++i) {
    *ctx.Output("Out", i) = x->Slice(begin, begin + sections[i]);  // a view: no copy
    begin += sections[i];
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterDistOps(OpRegistry* r) {
  r->Register("send").Input("X", kDuplicable).Output("Out", kDuplicable | kDispensable)
      .Attr("epmap", std::vector<std::string>{}).Attr("send_varnames", std::vector<std::string>{})
      .Attr("sections", std::vector<int32_t>{}).Attr("trainer_id", int32_t{0}).Attr("sync_mode", true)
      .SetInferShape(NoShapeInference).SetKernelDtype(AnyKernelDtype).Kernel<float>(SendKernel);
  r->Register("recv").Input("X", kDuplicable | kDispensable).Output("Out", kDuplicable)
      .Attr("epmap", std::vector<std::string>{}).Attr("varnames", std::vector<std::string>{})
      .Attr("trainer_id", int32_t{0}).Attr("sync_mode", true)
      .SetInferShape(NoShapeInference).SetKernelDtype(AnyKernelDtype).Kernel<float>(RecvKernel);
  r->Register("send_barrier").Input("X", kDuplicable | kDispensable).Output("Out", kDuplicable | kDispensable)
      .Attr("endpoints", std::vector<std::string>{}).Attr("trainer_id", int32_t{0}).Attr("sync_mode", true)
      .Attr("half_async", false)
      .SetInferShape(NoShapeInference).SetKernelDtype(AnyKernelDtype).Kernel<float>(BarrierKernel<true>);
  r->Register("fetch_barrier").Input("X", kDuplicable | kDispensable).Output("Out", kDuplicable | kDispensable)
      .Attr("endpoints", std::vector<std::string>{}).Attr("trainer_id", int32_t{0})
      .SetInferShape(NoShapeInference).SetKernelDtype(AnyKernelDtype).Kernel<float>(BarrierKernel<false>);
  r->Register("split_byref").Input("X").Output("Out", kDuplicable).Attr("sections", std::vector<int32_t>{})
      .Attr("num", int32_t{0})
      .SetInferShape(SplitByrefInferShape).SetKernelDtype(AnyKernelDtype).Kernel<float>(SplitByrefKernel);
  r->Register("checkpoint_notify").Attr("epmap", std::vector<std::string>{}).Attr("dir", std::string())
      .Attr("lookup_table", std::string()).Attr("trainer_id", int32_t{0})
      .SetInferShape(NoShapeInference).SetKernelDtype(AnyKernelDtype).Kernel<float>(CheckpointNotifyKernel);
}

}  // namespace oar
