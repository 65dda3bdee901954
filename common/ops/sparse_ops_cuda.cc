// GPU kernels of lookup_table and lookup_table_v2 (with padding_idx) and of
// their gradients, dense or sparse (SelectedRows: one row per id, the
// values on the GPU, the rows on the host as SelectedRows keeps them).
// The ids are read on the host, where a fed batch lies (the executor does
// not move them: kReadAnywhere), or copied back from a GPU that made them:
// they are checked against the table, as on the CPU, so a bad id is an
// error naming it and its position, never a read outside the table; and a
// sparse gradient's rows are host memory. They reach the GPU with one copy
// queued on its stream.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/framework/selected_rows_util.h"
#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"

namespace oar {

namespace {

constexpr int64_t kNoPadding = -1;

// int64 input `slot` on the host: itself where it lies there (a fed
// batch: the slot is kReadAnywhere, so the executor left it), else a copy,
// which waits for the GPU that made it.
absl::StatusOr<Tensor> HostInt64(const ExecutionContext& ctx, const std::string& slot) {
  OAR_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, slot));
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, slot, *t));
  Tensor host;
  if (t->place().is_cpu()) {  // pinned ids are copied: an H2D copy from them would only be queued
    host.ShareDataWith(*t);
    return host;
  }
  OAR_RETURN_IF_ERROR(Annotate(t->CopyTo(CPUPlace(), &host), absl::StrCat(ctx.op().type, ": reading ", slot)));
  return host;
}

// `host`'s values on the kernel's GPU: `dev` itself when it already is.
absl::StatusOr<const int64_t*> OnGpu(const ExecutionContext& ctx, const Tensor* dev, const Tensor& host,
                                     Tensor* storage) {
  if (dev != nullptr && dev->place() == ctx.place()) return dev->data<int64_t>();
  OAR_RETURN_IF_ERROR(host.CopyTo(ctx.place(), storage));
  return storage->data<int64_t>();
}

absl::Status CheckIds(const ExecutionContext& ctx, const Tensor& ids, int64_t rows, int64_t pad) {
  const int64_t* ip = ids.data<int64_t>();
  for (int64_t i = 0, n = ids.numel(); i < n; ++i) {
    if (pad != kNoPadding && ip[i] == pad) continue;
    if (ip[i] < 0 || ip[i] >= rows) {
      return absl::InvalidArgumentError(
          absl::StrCat(ctx.op().type, ": id ", ip[i], " at position ", i, " is outside the table's ", rows, " rows"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const Tensor*> Table(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, "W"));
  if (w->dims().size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": W is ", w->dims().ToString(), ", not 2-D"));
  }
  return w;
}

absl::Status LookupKernel(const ExecutionContext& ctx) {
  if (ctx.Attr<bool>("remote_prefetch") && !ctx.Attr<std::vector<std::string>>("epmap").empty()) {
    return absl::UnimplementedError(absl::StrCat(ctx.op().type, ": on a GPU, W ('", ctx.op().Input("W")[0],
                                                 "') cannot be read from the pservers (remote_prefetch); run the "
                                                 "trainer on the CPU"));
  }
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const Tensor* w, Table(ctx));
  OAR_ASSIGN_OR_RETURN(const float* table, GpuIn<float>(ctx, "W"));
  const int64_t pad = ctx.Attr<int64_t>("padding_idx");
  OAR_ASSIGN_OR_RETURN(Tensor host_ids, HostInt64(ctx, "Ids"));
  OAR_RETURN_IF_ERROR(CheckIds(ctx, host_ids, w->dims()[0], pad));
  Tensor ids_storage;
  OAR_ASSIGN_OR_RETURN(const int64_t* ids, OnGpu(ctx, ctx.Input("Ids"), host_ids, &ids_storage));
  cuda::GatherRows<float>(table, ids, GpuOut<float>(ctx, "Out"), host_ids.numel(), w->dims()[1], pad, c->stream);
  return LaunchStatus(ctx);
}

absl::Status LookupGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  const Tensor* w = ctx.Input("W");  // its shape only (a distributed table's trainer copy has no values)
  if (w == nullptr || w->dims().size() != 2) {
    OAR_ASSIGN_OR_RETURN(w, Table(ctx));
  }
  OAR_ASSIGN_OR_RETURN(const float* dout, GpuIn<float>(ctx, GradVarName("Out")));
  Variable* dw_var = ctx.OutputVar(GradVarName("W"));
  if (dw_var == nullptr) return absl::OkStatus();
  const int64_t rows = w->dims()[0], width = w->dims()[1], pad = ctx.Attr<int64_t>("padding_idx");
  OAR_ASSIGN_OR_RETURN(Tensor host_ids, HostInt64(ctx, "Ids"));
  OAR_RETURN_IF_ERROR(CheckIds(ctx, host_ids, rows, pad));
  const int64_t n = host_ids.numel();
  if (ctx.Input(GradVarName("Out"))->numel() != n * width) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": Out@GRAD has ",
                                                   ctx.Input(GradVarName("Out"))->numel(), " elements for ", n,
                                                   " ids of width ", width));
  }
  Tensor ids_storage;
  OAR_ASSIGN_OR_RETURN(const int64_t* ids, OnGpu(ctx, ctx.Input("Ids"), host_ids, &ids_storage));
  if (ctx.Attr<bool>("is_sparse")) {
    SelectedRows* sr = dw_var->GetMutable<SelectedRows>();
    sr->height = rows;
    sr->rows.assign(host_ids.data<int64_t>(), host_ids.data<int64_t>() + n);
    sr->value.Resize(DDim{n, width});
    float* v = sr->value.mutable_data<float>(ctx.place());
    OAR_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(v, dout, sizeof(float) * static_cast<size_t>(n * width), cudaMemcpyDeviceToDevice, c->stream),
        ctx.op().type));
    if (pad != kNoPadding) cuda::ZeroPaddedRows<float>(v, ids, n, width, pad, c->stream);
    return LaunchStatus(ctx);
  }
  Tensor* dw = dw_var->GetMutable<Tensor>();
  dw->Resize(w->dims());
  float* d = dw->mutable_data<float>(ctx.place());
  cuda::Fill<float>(d, rows * width, 0.0f, c->stream);
  cuda::ScatterAddRows<float>(dout, ids, d, n, width, pad, c->stream);
  return LaunchStatus(ctx);
}

}  // namespace

void RegisterCudaSparseKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  for (const std::string type : {"lookup_table", "lookup_table_v2"}) {
    r->Extend(type).Kernel<float>(LookupKernel, gpu);
    r->Extend(type + "_grad").Kernel<float>(LookupGradKernel, gpu);
  }
}

}  // namespace oar
