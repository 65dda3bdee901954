// cross_entropy (hard int64 labels or soft labels) and mean, with gradients.
#include "common/framework/op_registry.h"
#include "common/ops/loss_util.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

using namespace loss_util;  // NOLINT: kernels here are built from these helpers

// ---- cross_entropy: Y = -log(X[label]) ----

absl::Status CrossEntropyInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X"), label = ctx.InputDim("Label");
  OAR_RETURN_IF_ERROR(CheckLabelShape(ctx, x, label, "X"));
  ctx.SetOutputDim("Y", LossDims(x));
  ctx.SetOutputDtype("Y", ctx.InputDtype("X"));
  ctx.ShareLoD("X", "Y");
  return absl::OkStatus();
}

template <typename T>
absl::Status CrossEntropyKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  auto [rows, cols] = RowsCols(x->dims());
  const T* xp = x->data<T>();
  T* y = ctx.Output("Y")->mutable_data<T>();
  if (ctx.Attr<bool>("soft_label")) {
    OAR_RETURN_IF_ERROR(RequireDtype<T>(ctx, "Label", *label));
    const T* lp = label->data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      T s = 0;
      for (int64_t c = 0; c < cols; ++c) s -= lp[r * cols + c] * SafeLog(xp[r * cols + c]);
      y[r] = s;
    }
    return absl::OkStatus();
  }
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Label", *label));
  const int64_t* lp = label->data<int64_t>();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  for (int64_t r = 0; r < rows; ++r) {
    if (lp[r] == ignore) {
      y[r] = 0;
      continue;
    }
    OAR_RETURN_IF_ERROR(CheckLabelValue(ctx, lp[r], r, cols));
    y[r] = -SafeLog(xp[r * cols + lp[r]]);
  }
  return absl::OkStatus();
}

absl::Status CrossEntropyGradInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X"), label = ctx.InputDim("Label");
  OAR_RETURN_IF_ERROR(CheckLabelShape(ctx, x, label, "X"));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Y"), LossDims(x)));
  return GradSameShapeAsX(ctx);
}

template <typename T>
absl::Status CrossEntropyGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, GradVarName("Y")));
  OAR_RETURN_IF_ERROR(RequireLabelDtype<T>(ctx, *label));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Y"), 0, *dy));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  auto [rows, cols] = RowsCols(x->dims());
  const T* xp = x->data<T>();
  const T* g = dy->data<T>();
  T* d = dx->mutable_data<T>();
  const T tiny = std::numeric_limits<T>::min();
  if (ctx.Attr<bool>("soft_label")) {
    const T* lp = label->data<T>();
    for (int64_t i = 0; i < rows * cols; ++i) d[i] = -g[i / cols] * lp[i] / std::max(xp[i], tiny);
    return absl::OkStatus();
  }
  std::fill(d, d + rows * cols, T(0));
  const int64_t* lp = label->data<int64_t>();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  for (int64_t r = 0; r < rows; ++r) {
    if (lp[r] == ignore) continue;
    OAR_RETURN_IF_ERROR(CheckLabelValue(ctx, lp[r], r, cols));
    d[r * cols + lp[r]] = -g[r] / std::max(xp[r * cols + lp[r]], tiny);
  }
  return absl::OkStatus();
}

// ---- mean ----

absl::Status MeanInferShape(InferShapeContext& ctx) {
  ctx.SetOutputDim("Out", DDim{1});
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  return absl::OkStatus();
}

template <typename T>
absl::Status MeanKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const T* p = x->data<T>();
  int64_t n = x->numel();
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += p[i];
  ctx.Output("Out")->mutable_data<T>()[0] = n ? s / T(n) : T(0);
  return absl::OkStatus();
}

absl::Status MeanGradInferShape(InferShapeContext& ctx) {
  const DDim g = ctx.InputDim(GradVarName("Out"));
  if (ctx.IsRuntime() && g.numel() != 1) {
    return ctx.Error("input ", InputLabel(ctx.op(), GradVarName("Out")), " has shape ", g.ToString(), ", expected [1]");
  }
  return GradSameShapeAsX(ctx);
}

template <typename T>
absl::Status MeanGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  int64_t n = x->numel();
  T v = g->data<T>()[0] / T(n);
  T* d = dx->mutable_data<T>();
  std::fill(d, d + n, v);
  return absl::OkStatus();
}

}  // namespace

void RegisterLossOps(OpRegistry* r) {
  r->Register("cross_entropy")
      .Input("X")
      .Input("Label")
      .Output("Y")
      .Attr("soft_label", false)
      .Attr("ignore_index", int32_t{-100})
      .SetInferShape(CrossEntropyInferShape)
      .SetGradMaker(GradOpMaker({"X", "Label"}, {}, {"Y"}, {"X"}))
      .Kernel<float>(CrossEntropyKernel<float>)
      .Kernel<double>(CrossEntropyKernel<double>);
  // Y and Label@GRAD: Fluid 1.0-1.3's default grad maker wrote them; unread, unwritten.
  r->Register("cross_entropy_grad")
      .NotInPlace()
      .Input("X")
      .Input("Label")
      .Input(GradVarName("Y"))
      .Input("Y", kDispensable)
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Label"), kDispensable)
      .Attr("soft_label", false)
      .Attr("ignore_index", int32_t{-100})
      .SetInferShape(CrossEntropyGradInferShape)
      .Kernel<float>(CrossEntropyGradKernel<float>)
      .Kernel<double>(CrossEntropyGradKernel<double>);

  r->Register("mean")
      .Input("X")
      .Output("Out")
      .SetInferShape(MeanInferShape)
      .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
      .Kernel<float>(MeanKernel<float>)
      .Kernel<double>(MeanKernel<double>);
  r->Register("mean_grad")
      .Input("X")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .SetInferShape(MeanGradInferShape)
      .Kernel<float>(MeanGradKernel<float>)
      .Kernel<double>(MeanGradKernel<double>);
}

}  // namespace oar
