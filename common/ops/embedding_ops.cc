// lookup_table (embedding) and Paddle 2.x's lookup_table_v2 (ids without the
// trailing 1) with dense or sparse (SelectedRows) gradient and padding_idx,
// and merge_selected_rows. A lookup with remote_prefetch whose epmap a
// transpiler filled (Fluid 1.5+'s layout for a sparse table kept whole on
// the pservers) reads its rows from them (RunEnv::prefetch_rows) instead of
// its own copy, which a trainer no longer receives.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/framework/run_env.h"
#include "common/framework/selected_rows_util.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

constexpr int64_t kNoPadding = -1;

// Out's shape: lookup_table's is Ids' with the last dimension (1) replaced
// by W's width; lookup_table_v2's (Paddle 2.x) is Ids' with W's width
// appended.
absl::StatusOr<DDim> LookupOutDims(const InferShapeContext& ctx) {
  DDim w = ctx.InputDim("W"), ids = ctx.InputDim("Ids");
  if (w.size() != 2) return ctx.Error("W", w.ToString(), " must be 2-D [rows, width]");
  if (ctx.InputDtype("Ids") != DataType::kInt64) return ctx.Error("Ids must be int64");
  DDim out = ids;
  if (ctx.op().type.rfind("lookup_table_v2", 0) == 0) {
    out.push_back(w[1]);
    return out;
  }
  if (ids.size() < 1 || (ids[ids.size() - 1] != 1 && ids[ids.size() - 1] >= 0)) {
    return ctx.Error("Ids", ids.ToString(), " must have last dimension 1");
  }
  out[out.size() - 1] = w[1];
  return out;
}

absl::Status LookupInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, LookupOutDims(ctx));
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("W"));
  ctx.ShareLoD("Ids", "Out");
  return absl::OkStatus();
}

absl::Status CheckId(const ExecutionContext& ctx, int64_t id, int64_t i, int64_t rows) {
  if (id < 0 || id >= rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": id ", id, " at position ", i, " is outside the table's ", rows, " rows"));
  }
  return absl::OkStatus();
}

bool RemotePrefetch(const ExecutionContext& ctx) {
  return ctx.Attr<bool>("remote_prefetch") && !ctx.Attr<std::vector<std::string>>("epmap").empty();
}

// The rows of Ids from the pservers: each distinct id asked once.
template <typename T>
absl::Status RemoteLookupKernel(const ExecutionContext& ctx, const Tensor& ids) {
  if (ctx.env() == nullptr || !ctx.env()->prefetch_rows) {
    return absl::FailedPreconditionError(
        absl::StrCat(ctx.op().type, ": W ('", ctx.op().Input("W")[0],
                     "') is kept on the pservers (remote_prefetch, epmap "
                     "set by the transpiler); run the program as a trainer of that job"));
  }
  const RemoteTable table{ctx.Attr<std::vector<std::string>>("epmap"),
                          ctx.Attr<std::vector<std::string>>("table_names"),
                          ctx.Attr<std::vector<int64_t>>("height_sections"), ctx.Attr<int32_t>("trainer_id")};
  const int64_t pad = ctx.Attr<int64_t>("padding_idx");
  const int64_t* ip = ids.data<int64_t>();
  std::vector<int64_t> unique;
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (!(ip[i] == pad && pad != kNoPadding)) unique.push_back(ip[i]);
  }
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  Tensor rows;
  if (!unique.empty()) OAR_RETURN_IF_ERROR(ctx.env()->prefetch_rows(table, unique, &rows));
  const int64_t width = ctx.Input("W")->dims()[1];
  if (!unique.empty() && (rows.dtype() != DataTypeOf<T>::value || rows.dims()[1] != width)) {
    return absl::InternalError(absl::StrCat(ctx.op().type, ": the pservers' rows of '", ctx.op().Input("W")[0],
                                            "' are ", rows.dims().ToString(), ", not of width ", width));
  }
  T* out = ctx.Output("Out")->mutable_data<T>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (ip[i] == pad && pad != kNoPadding) {
      std::fill(out + i * width, out + (i + 1) * width, T(0));
      continue;
    }
    const size_t at = static_cast<size_t>(std::lower_bound(unique.begin(), unique.end(), ip[i]) - unique.begin());
    std::memcpy(out + i * width, rows.data<T>() + at * width, sizeof(T) * width);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status LookupKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, "W"));
  OAR_ASSIGN_OR_RETURN(const Tensor* ids, RequireInput(ctx, "Ids"));
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Ids", *ids));
  if (RemotePrefetch(ctx)) return RemoteLookupKernel<T>(ctx, *ids);
  const int64_t rows = w->dims()[0], width = w->dims()[1], pad = ctx.Attr<int64_t>("padding_idx");
  const int64_t* ip = ids->data<int64_t>();
  const T* table = w->data<T>();
  T* out = ctx.Output("Out")->mutable_data<T>();
  for (int64_t i = 0, n = ids->numel(); i < n; ++i) {
    if (ip[i] == pad && pad != kNoPadding) {
      std::fill(out + i * width, out + (i + 1) * width, T(0));
      continue;
    }
    OAR_RETURN_IF_ERROR(CheckId(ctx, ip[i], i, rows));
    std::memcpy(out + i * width, table + ip[i] * width, sizeof(T) * width);
  }
  return absl::OkStatus();
}

void LookupGradVarType(const OpDesc& op, BlockDesc* block) { SetSparseGradType(op, block, GradVarName("W")); }

absl::Status LookupGradInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, LookupOutDims(ctx));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Out"), out));
  ctx.SetOutputDim(GradVarName("W"), ctx.InputDim("W"));
  ctx.SetOutputDtype(GradVarName("W"), ctx.InputDtype("W"));
  return absl::OkStatus();
}

template <typename T>
absl::Status LookupGradKernel(const ExecutionContext& ctx) {
  // W's shape only: a distributed table's copy on a trainer has no values
  // (fake_init), as in Fluid, whose kernel reads W's dims alone.
  const Tensor* w = ctx.Input("W");
  if (w == nullptr || w->dims().size() != 2) OAR_RETURN_IF_ERROR(RequireInput(ctx, "W").status());
  if (w->dims().size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), "W"), w->dims().ToString(),
                                                   " is not a [rows, width] table"));
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* ids, RequireInput(ctx, "Ids"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dout, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Ids", *ids));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *dout));
  Variable* dw_var = ctx.OutputVar(GradVarName("W"));
  if (dw_var == nullptr) return absl::OkStatus();
  const int64_t rows = w->dims()[0], width = w->dims()[1], pad = ctx.Attr<int64_t>("padding_idx");
  const int64_t n = ids->numel();
  const int64_t* ip = ids->data<int64_t>();
  const T* g = dout->data<T>();
  for (int64_t i = 0; i < n; ++i) {
    if (!(ip[i] == pad && pad != kNoPadding)) OAR_RETURN_IF_ERROR(CheckId(ctx, ip[i], i, rows));
  }
  if (ctx.Attr<bool>("is_sparse")) {
    SelectedRows* sr = dw_var->GetMutable<SelectedRows>();
    sr->height = rows;
    sr->rows.assign(ip, ip + n);
    T* v = sr->value.mutable_data<T>(DDim{n, width});
    std::memcpy(v, g, sizeof(T) * n * width);
    for (int64_t i = 0; i < n; ++i) {
      if (ip[i] == pad && pad != kNoPadding) std::fill(v + i * width, v + (i + 1) * width, T(0));
    }
    return absl::OkStatus();
  }
  Tensor* dw = dw_var->GetMutable<Tensor>();
  T* d = dw->mutable_data<T>(w->dims());
  std::fill(d, d + dw->numel(), T(0));
  for (int64_t i = 0; i < n; ++i) {
    if (ip[i] == pad && pad != kNoPadding) continue;
    for (int64_t k = 0; k < width; ++k) d[ip[i] * width + k] += g[i * width + k];
  }
  return absl::OkStatus();
}

DataType TableDtype(const ExecutionContext& ctx) {
  const Tensor* w = ctx.Input("W");
  return w && w->initialized() ? w->dtype() : DataType::kFloat32;
}

// ---- merge_selected_rows ----

template <typename T>
absl::Status MergeKernel(const ExecutionContext& ctx) {
  const Variable* in = ctx.InputVar("X");
  if (in == nullptr || !in->IsType<SelectedRows>()) {
    return absl::InvalidArgumentError("merge_selected_rows: input X is not a SelectedRows");
  }
  OAR_RETURN_IF_ERROR(CheckSelectedRows(in->Get<SelectedRows>(), "merge_selected_rows: X"));
  *ctx.OutputVar("Out")->GetMutable<SelectedRows>() = MergeRows<T>(in->Get<SelectedRows>());
  return absl::OkStatus();
}

void MergeVarType(const OpDesc& op, BlockDesc* block) {
  for (const auto& name : op.Output("Out")) block->Var(name)->type = paddle::framework::proto::VarType::SELECTED_ROWS;
}

absl::Status NoShape(InferShapeContext&) { return absl::OkStatus(); }

}  // namespace

void RegisterEmbeddingOps(OpRegistry* r) {
  auto attrs = [](OpInfo& info) -> OpInfo& {
    return info.Attr("is_sparse", false)
        .Attr("is_distributed", false)
        .Attr("padding_idx", int64_t{kNoPadding})
        .Attr("remote_prefetch", false)
        .Attr("epmap", std::vector<std::string>{})
        .Attr("table_names", std::vector<std::string>{})
        .Attr("height_sections", std::vector<int64_t>{})
        .Attr("trainer_id", int32_t{0});
  };
  for (const std::string type : {"lookup_table", "lookup_table_v2"}) {
    // Ids: the GPU kernels check them on the host, where a fed batch already is.
    attrs(r->Register(type).Input("W").Input("Ids", kReadAnywhere).Output("Out"))
        .SetInferShape(LookupInferShape)
        .SetKernelDtype(TableDtype)
        .SetGradMaker(GradOpMaker({"W", "Ids"}, {}, {"Out"}, {"W"}))
        .Kernel<float>(LookupKernel<float>)
        .Kernel<double>(LookupKernel<double>);
    // Out: Fluid 1.3-1.4's grad maker passed the forward output too; no kernel reads it.
    // W: only its shape is read (so it need hold no values, and stays where it lies).
    attrs(r->Register(type + "_grad")
              .Input("W", kDispensable | kReadAnywhere)
              .Input("Ids", kReadAnywhere)
              .Input("Out", kDispensable)
              .Input(GradVarName("Out"))
              .Output(GradVarName("W"), kDispensable)
              .Output(GradVarName("Ids"), kDispensable))  // 1.0-1.4 named it; never written
        .SetInferShape(LookupGradInferShape)
        .SetInferVarType(LookupGradVarType)
        .SetKernelDtype(TableDtype)
        .Kernel<float>(LookupGradKernel<float>)
        .Kernel<double>(LookupGradKernel<double>);
  }
  r->Register("merge_selected_rows")
      .Input("X")
      .Output("Out")
      .SetInferShape(NoShape)
      .SetInferVarType(MergeVarType)
      .Kernel<float>(MergeKernel<float>)
      .Kernel<double>(MergeKernel<double>);
}

}  // namespace oar
