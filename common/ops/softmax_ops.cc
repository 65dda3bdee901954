// softmax and softmax_with_cross_entropy, with gradients.
#include "common/op_registry.h"
#include "common/ops/loss_util.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

using namespace loss_util;  // NOLINT: kernels here are built from these helpers

// ---- softmax ----

absl::Status SoftmaxInferShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(CheckLastAxis(ctx, ctx.InputDim("X")));
  return SameShapeAsX(ctx);
}

template <typename T>
absl::Status SoftmaxKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  auto [rows, cols] = RowsCols(x->dims());
  SoftmaxRows(x->data<T>(), ctx.Output("Out")->mutable_data<T>(), rows, cols);
  return absl::OkStatus();
}

absl::Status SoftmaxGradInferShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(ExpectLikeInput(ctx, GradVarName("Out"), "Out"));
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim("Out"));
  return absl::OkStatus();
}

template <typename T>
absl::Status SoftmaxGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  auto [rows, cols] = RowsCols(out->dims());
  const T* y = out->data<T>();
  const T* gy = g->data<T>();
  T* d = dx->mutable_data<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * cols;
    T dot = 0;
    for (int64_t c = 0; c < cols; ++c) dot += y[o + c] * gy[o + c];
    for (int64_t c = 0; c < cols; ++c) d[o + c] = y[o + c] * (gy[o + c] - dot);
  }
  return absl::OkStatus();
}

// ---- softmax_with_cross_entropy ----

absl::Status SwceInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("Logits"), label = ctx.InputDim("Label");
  OAR_RETURN_IF_ERROR(CheckLastAxis(ctx, x));
  OAR_RETURN_IF_ERROR(CheckLabelShape(ctx, x, label, "Logits"));
  ctx.SetOutputDim("Softmax", x);
  ctx.SetOutputDim("Loss", LossDims(x));
  ctx.SetOutputDtype("Softmax", ctx.InputDtype("Logits"));
  ctx.SetOutputDtype("Loss", ctx.InputDtype("Logits"));
  return absl::OkStatus();
}

template <typename T>
absl::Status SwceKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "Logits"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  auto [rows, cols] = RowsCols(x->dims());
  T* sm = ctx.Output("Softmax")->mutable_data<T>();
  T* loss = ctx.Output("Loss")->mutable_data<T>();
  if (ctx.Attr<bool>("use_softmax")) {
    SoftmaxRows(x->data<T>(), sm, rows, cols);
  } else {  // Paddle 2.x's cross_entropy(use_softmax=False): Logits are already probabilities
    std::copy(x->data<T>(), x->data<T>() + rows * cols, sm);
  }
  if (ctx.Attr<bool>("soft_label")) {
    OAR_RETURN_IF_ERROR(RequireDtype<T>(ctx, "Label", *label));
    const T* lp = label->data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      T s = 0;
      for (int64_t c = 0; c < cols; ++c) s -= lp[r * cols + c] * SafeLog(sm[r * cols + c]);
      loss[r] = s;
    }
    return absl::OkStatus();
  }
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Label", *label));
  const int64_t* lp = label->data<int64_t>();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  for (int64_t r = 0; r < rows; ++r) {
    if (lp[r] == ignore) { loss[r] = 0; continue; }
    OAR_RETURN_IF_ERROR(CheckLabelValue(ctx, lp[r], r, cols));
    loss[r] = -SafeLog(sm[r * cols + lp[r]]);
  }
  return absl::OkStatus();
}

absl::Status SwceGradInferShape(InferShapeContext& ctx) {
  const DDim sm = ctx.InputDim("Softmax");
  OAR_RETURN_IF_ERROR(CheckLastAxis(ctx, sm));
  OAR_RETURN_IF_ERROR(CheckLabelShape(ctx, sm, ctx.InputDim("Label"), "Softmax"));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Loss"), LossDims(sm)));
  ctx.SetOutputDim(GradVarName("Logits"), ctx.InputDim("Softmax"));
  return absl::OkStatus();
}

template <typename T>
absl::Status SwceGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* sm, RequireInput(ctx, "Softmax"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dloss, RequireInput(ctx, GradVarName("Loss")));
  OAR_RETURN_IF_ERROR(RequireLabelDtype<T>(ctx, *label));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Loss"), 0, *dloss));
  Tensor* dx = ctx.Output(GradVarName("Logits"));
  if (dx == nullptr) return absl::OkStatus();
  auto [rows, cols] = RowsCols(sm->dims());
  const T* s = sm->data<T>();
  const T* g = dloss->data<T>();
  T* d = dx->mutable_data<T>();
  // Without the softmax (use_softmax=false) the loss is -Σ label·log(p) of
  // the input p itself: its gradient is -label·g/p.
  const bool softmax = ctx.Attr<bool>("use_softmax");
  if (ctx.Attr<bool>("soft_label")) {
    const T* lp = label->data<T>();
    for (int64_t i = 0; i < rows * cols; ++i) {
      d[i] = softmax ? (s[i] - lp[i]) * g[i / cols] : -lp[i] * g[i / cols] / s[i];
    }
    return absl::OkStatus();
  }
  const int64_t* lp = label->data<int64_t>();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * cols;
    if (lp[r] == ignore) {
      std::fill(d + o, d + o + cols, T(0));
      continue;
    }
    OAR_RETURN_IF_ERROR(CheckLabelValue(ctx, lp[r], r, cols));
    if (!softmax) {
      std::fill(d + o, d + o + cols, T(0));
      d[o + lp[r]] = -g[r] / s[o + lp[r]];
      continue;
    }
    for (int64_t c = 0; c < cols; ++c) d[o + c] = s[o + c] * g[r];
    d[o + lp[r]] -= g[r];
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterSoftmaxOps(OpRegistry* r) {
  r->Register("softmax").Input("X").Output("Out").Attr("axis", int32_t{-1})
      .Attr("use_cudnn", false).Attr("use_mkldnn", false).Attr("is_test", false)
      .SetInferShape(SoftmaxInferShape)
      .SetGradMaker(GradOpMaker({}, {"Out"}, {"Out"}, {"X"}))
      .Kernel<float>(SoftmaxKernel<float>).Kernel<double>(SoftmaxKernel<double>);
  r->Register("softmax_grad").Input("Out").Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable).Attr("axis", int32_t{-1})
      .Attr("use_cudnn", false).Attr("use_mkldnn", false).Attr("is_test", false)
      .SetInferShape(SoftmaxGradInferShape)
      .Kernel<float>(SoftmaxGradKernel<float>).Kernel<double>(SoftmaxGradKernel<double>);

  r->Register("softmax_with_cross_entropy").Input("Logits").Input("Label")
      .Output("Softmax").Output("Loss")
      .Attr("soft_label", false).Attr("ignore_index", int32_t{-100})
      .Attr("numeric_stable_mode", true).Attr("axis", int32_t{-1})
      .Attr("use_softmax", true)
      .SetInferShape(SwceInferShape)
      .SetGradMaker(GradOpMaker({"Label"}, {"Softmax"}, {"Loss"}, {"Logits"}))
      .Kernel<float>(SwceKernel<float>).Kernel<double>(SwceKernel<double>);
  r->Register("softmax_with_cross_entropy_grad").Input("Label").Input("Softmax")
      .Input(GradVarName("Loss")).Output(GradVarName("Logits"), kDispensable)
      .Attr("soft_label", false).Attr("ignore_index", int32_t{-100})
      .Attr("numeric_stable_mode", true).Attr("axis", int32_t{-1}).Attr("use_softmax", true)
      .SetInferShape(SwceGradInferShape)
      .Kernel<float>(SwceGradKernel<float>).Kernel<double>(SwceGradKernel<double>);

}

}  // namespace oar
