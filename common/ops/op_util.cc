#include "common/ops/op_util.h"

namespace oar {

void SetSparseGradType(const OpDesc& op, BlockDesc* block, const std::string& grad_slot) {
  for (const auto& name : op.Output(grad_slot)) {
    block->Var(name)->type = op.GetAttr<bool>("is_sparse") ? paddle::framework::proto::VarType::SELECTED_ROWS
                                                           : paddle::framework::proto::VarType::LOD_TENSOR;
  }
}

absl::Status SameShapeAsX(InferShapeContext& ctx) {
  ctx.SetOutputDim("Out", ctx.InputDim("X"));
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  ctx.ShareLoD("X", "Out");
  return absl::OkStatus();
}

absl::Status GradSameShapeAsX(InferShapeContext& ctx) {
  const std::string gx = GradVarName("X");
  ctx.SetOutputDim(gx, ctx.InputDim("X"));
  ctx.SetOutputDtype(gx, ctx.InputDtype("X"));
  return absl::OkStatus();
}

DataType InputDtypeOf(const ExecutionContext& ctx, const char* slot) {
  const Tensor* t = ctx.Input(slot);
  return t && t->initialized() ? t->dtype() : DataType::kFloat32;
}

OpInfo& NumericCpuKernels(OpInfo& info, KernelFn f32, KernelFn f64, KernelFn i32, KernelFn i64) {
  return info.AddKernel(Place::Kind::kCPU, DataType::kFloat32, f32)
      .AddKernel(Place::Kind::kCPU, DataType::kFloat64, f64)
      .AddKernel(Place::Kind::kCPU, DataType::kInt32, i32)
      .AddKernel(Place::Kind::kCPU, DataType::kInt64, i64);
}

absl::StatusOr<std::vector<int64_t>> IndexValues(const ExecutionContext& ctx, const char* slot, int64_t limit) {
  OAR_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, slot));
  std::vector<int64_t> out(static_cast<size_t>(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) {
    const int64_t v = t->dtype() == DataType::kInt32 ? t->data<int32_t>()[i] : t->data<int64_t>()[i];
    if (v < 0 || v >= limit) {
      return absl::InvalidArgumentError(
          absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), slot), " holds ", v, ", outside [0, ", limit, ")"));
    }
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

bool HasShapeTensors(const OpDesc& op) {
  for (const char* slot : {"ShapeTensor", "ShapeTensorList"}) {
    for (const std::string& a : op.Input(slot)) {
      if (!a.empty() && a != kEmptyVarName) return true;
    }
  }
  return false;
}

absl::Status ResizeFromShapeTensors(const ExecutionContext& ctx, Tensor* out) {
  if (!HasShapeTensors(ctx.op())) return absl::OkStatus();
  const bool whole = !ctx.op().Input("ShapeTensor").empty() && ctx.op().Input("ShapeTensor")[0] != kEmptyVarName;
  const char* slot = whole ? "ShapeTensor" : "ShapeTensorList";
  std::vector<int64_t> dims;
  for (size_t i = 0; i < (whole ? 1 : ctx.InputSize(slot)); ++i) {
    OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, slot, i));
    if ((in->dtype() != DataType::kInt32 && in->dtype() != DataType::kInt64) || (!whole && in->numel() != 1)) {
      return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), slot, i),
                                                     in->dims().ToString(), " ", DataTypeName(in->dtype()), " is not ",
                                                     whole ? "a 1-D int tensor" : "one int value", " (a shape)"));
    }
    Tensor host;
    OAR_ASSIGN_OR_RETURN(const Tensor* t, OnHost(*in, &host));
    for (int64_t k = 0; k < t->numel(); ++k) {
      dims.push_back(t->dtype() == DataType::kInt32 ? t->data<int32_t>()[k] : t->data<int64_t>()[k]);
    }
  }
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": the shape its ", slot, " gives, ",
                                                     DDim(dims).ToString(), ", has a negative dimension"));
    }
  }
  out->Resize(DDim(dims));
  return absl::OkStatus();
}

absl::StatusOr<const Tensor*> OnHost(const Tensor& t, Tensor* storage) {
  if (t.place().is_host()) return &t;
  OAR_RETURN_IF_ERROR(t.CopyTo(CPUPlace(), storage));
  return storage;
}

absl::StatusOr<const Tensor*> RequireInput(const ExecutionContext& ctx, const std::string& slot, size_t i) {
  const Tensor* t = ctx.Input(slot, i);
  if (t == nullptr || !t->initialized()) {
    const auto& args = ctx.op().Input(slot);
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": input ", slot, " ('",
                                                   i < args.size() ? args[i] : "?", "') holds no tensor data"));
  }
  return t;
}

std::string InputLabel(const OpDesc& op, const std::string& slot, size_t i) {
  const auto& args = op.Input(slot);
  const std::string name = i < args.size() ? args[i] : "?";
  if (args.size() > 1) return absl::StrCat("'", name, "' (", slot, "[", i, "])");
  return absl::StrCat("'", name, "' (", slot, ")");
}

DDim XShapeOf(const DDim& x) {
  DDim d{0};
  for (int64_t v : x) d.push_back(v);
  return d;
}

DDim FromXShape(const DDim& xshape) {
  DDim d;
  for (int i = 1; i < xshape.size(); ++i) d.push_back(xshape[i]);
  return d;
}

bool SameScalar(const DDim& a, const DDim& b) {
  return a.size() <= 1 && b.size() <= 1 && a.numel() == 1 && b.numel() == 1;
}

absl::Status ExpectInputDims(const InferShapeContext& ctx, const std::string& slot, const DDim& want, size_t i) {
  if (!ctx.IsRuntime()) return absl::OkStatus();
  const DDim got = ctx.InputDim(slot, i);
  if (got == want || SameScalar(got, want)) return absl::OkStatus();
  return ctx.Error("input ", InputLabel(ctx.op(), slot, i), " has shape ", got.ToString(), ", expected ",
                   want.ToString());
}

absl::Status ExpectLikeInput(const InferShapeContext& ctx, const std::string& slot, const std::string& like) {
  if (!ctx.IsRuntime()) return absl::OkStatus();
  const DDim got = ctx.InputDim(slot), want = ctx.InputDim(like);
  if (got != want && !SameScalar(got, want)) {
    return ctx.Error("input ", InputLabel(ctx.op(), slot), " has shape ", got.ToString(), ", expected ",
                     want.ToString(), " (the shape of ", InputLabel(ctx.op(), like), ")");
  }
  if (ctx.InputDtype(slot) != ctx.InputDtype(like)) {
    return ctx.Error("input ", InputLabel(ctx.op(), slot), " has dtype ", DataTypeName(ctx.InputDtype(slot)),
                     ", expected ", DataTypeName(ctx.InputDtype(like)), " (the dtype of ", InputLabel(ctx.op(), like),
                     ")");
  }
  return absl::OkStatus();
}

}  // namespace oar
