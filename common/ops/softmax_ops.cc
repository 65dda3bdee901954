// softmax, log_softmax and softmax_with_cross_entropy, with gradients.
// log_softmax: out = x − max − log Σ exp(x − max) along each fibre; its
// gradient from Out: dx = dy − exp(out) · Σ dy (sums in double).
#include <cmath>

#include "common/framework/op_registry.h"
#include "common/ops/loss_util.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

using namespace loss_util;  // NOLINT: kernels here are built from these helpers

// ---- softmax ----

absl::Status SoftmaxInferShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(CheckAxis(ctx, "X", ctx.InputDim("X")));
  return SameShapeAsX(ctx);
}

template <typename T>
absl::Status SoftmaxKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  SoftmaxAlong(x->data<T>(), ctx.Output("Out")->mutable_data<T>(), ViewAlong(x->dims(), ctx.Attr<int32_t>("axis")));
  return absl::OkStatus();
}

absl::Status SoftmaxGradInferShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(CheckAxis(ctx, "Out", ctx.InputDim("Out")));
  OAR_RETURN_IF_ERROR(ExpectLikeInput(ctx, GradVarName("Out"), "Out"));
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim("Out"));
  return absl::OkStatus();
}

// dx = y * (dy - <y, dy>) along each fibre.
template <typename T>
absl::Status SoftmaxGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const AxisView v = ViewAlong(out->dims(), ctx.Attr<int32_t>("axis"));
  const T* y = out->data<T>();
  const T* gy = g->data<T>();
  T* d = dx->mutable_data<T>();
  for (int64_t r = 0; r < v.rows(); ++r) {
    const int64_t b = v.Base(r);
    T dot = 0;
    for (int64_t c = 0; c < v.n; ++c) dot += y[b + c * v.post] * gy[b + c * v.post];
    for (int64_t c = 0; c < v.n; ++c) {
      const int64_t i = b + c * v.post;
      d[i] = y[i] * (gy[i] - dot);
    }
  }
  return absl::OkStatus();
}

// ---- log_softmax (its shapes are softmax's) ----

template <typename T>
absl::Status LogSoftmaxKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, *x));
  const AxisView v = ViewAlong(x->dims(), ctx.Attr<int32_t>("axis"));
  const T* xp = x->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(x->dims());
  for (int64_t r = 0; r < v.rows(); ++r) {
    const int64_t b = v.Base(r);
    double mx = xp[b];
    for (int64_t c = 1; c < v.n; ++c) mx = std::max<double>(mx, xp[b + c * v.post]);
    double sum = 0;
    for (int64_t c = 0; c < v.n; ++c) sum += std::exp(xp[b + c * v.post] - mx);
    const double shift = mx + std::log(sum);
    for (int64_t c = 0; c < v.n; ++c) o[b + c * v.post] = static_cast<T>(xp[b + c * v.post] - shift);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status LogSoftmaxGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const AxisView v = ViewAlong(out->dims(), ctx.Attr<int32_t>("axis"));
  const T* y = out->data<T>();
  const T* gy = g->data<T>();
  T* d = dx->mutable_data<T>(out->dims());
  for (int64_t r = 0; r < v.rows(); ++r) {
    const int64_t b = v.Base(r);
    double sum = 0;
    for (int64_t c = 0; c < v.n; ++c) sum += gy[b + c * v.post];
    for (int64_t c = 0; c < v.n; ++c) {
      const int64_t i = b + c * v.post;
      d[i] = static_cast<T>(gy[i] - std::exp(static_cast<double>(y[i])) * sum);
    }
  }
  return absl::OkStatus();
}

// ---- softmax_with_cross_entropy ----
// The class axis is `axis`: loss fibre r holds Label[r] (hard) or the
// fibre of soft labels, and Loss has the class axis reduced to 1.

absl::Status SwceInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("Logits"), label = ctx.InputDim("Label");
  OAR_RETURN_IF_ERROR(CheckAxis(ctx, "Logits", x));
  const int axis = ctx.Attr<int32_t>("axis");
  OAR_RETURN_IF_ERROR(CheckLabelShape(ctx, x, label, "Logits", axis));
  ctx.SetOutputDim("Softmax", x);
  ctx.SetOutputDim("Loss", LossDims(x, axis));
  ctx.SetOutputDtype("Softmax", ctx.InputDtype("Logits"));
  ctx.SetOutputDtype("Loss", ctx.InputDtype("Logits"));
  return absl::OkStatus();
}

template <typename T>
absl::Status SwceKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "Logits"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  const AxisView v = ViewAlong(x->dims(), ctx.Attr<int32_t>("axis"));
  T* sm = ctx.Output("Softmax")->mutable_data<T>();
  T* loss = ctx.Output("Loss")->mutable_data<T>();
  if (ctx.Attr<bool>("use_softmax")) {
    SoftmaxAlong(x->data<T>(), sm, v);
  } else {  // Paddle 2.x's cross_entropy(use_softmax=False): Logits are already probabilities
    std::copy(x->data<T>(), x->data<T>() + x->numel(), sm);
  }
  if (ctx.Attr<bool>("soft_label")) {
    OAR_RETURN_IF_ERROR(RequireDtype<T>(ctx, "Label", *label));
    const T* lp = label->data<T>();
    for (int64_t r = 0; r < v.rows(); ++r) {
      const int64_t b = v.Base(r);
      T s = 0;
      for (int64_t c = 0; c < v.n; ++c) s -= lp[b + c * v.post] * SafeLog(sm[b + c * v.post]);
      loss[r] = s;
    }
    return absl::OkStatus();
  }
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Label", *label));
  const int64_t* lp = label->data<int64_t>();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  for (int64_t r = 0; r < v.rows(); ++r) {
    if (lp[r] == ignore) {
      loss[r] = 0;
      continue;
    }
    OAR_RETURN_IF_ERROR(CheckLabelValue(ctx, lp[r], r, v.n));
    loss[r] = -SafeLog(sm[v.Base(r) + lp[r] * v.post]);
  }
  return absl::OkStatus();
}

absl::Status SwceGradInferShape(InferShapeContext& ctx) {
  const DDim sm = ctx.InputDim("Softmax");
  OAR_RETURN_IF_ERROR(CheckAxis(ctx, "Softmax", sm));
  const int axis = ctx.Attr<int32_t>("axis");
  OAR_RETURN_IF_ERROR(CheckLabelShape(ctx, sm, ctx.InputDim("Label"), "Softmax", axis));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Loss"), LossDims(sm, axis)));
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
  const AxisView v = ViewAlong(sm->dims(), ctx.Attr<int32_t>("axis"));
  const T* s = sm->data<T>();
  const T* g = dloss->data<T>();
  T* d = dx->mutable_data<T>();
  // Without the softmax (use_softmax=false) the loss is -Σ label·log(p) of
  // the input p itself: its gradient is -label·g/p.
  const bool softmax = ctx.Attr<bool>("use_softmax");
  if (ctx.Attr<bool>("soft_label")) {
    const T* lp = label->data<T>();
    for (int64_t r = 0; r < v.rows(); ++r) {
      const int64_t b = v.Base(r);
      for (int64_t c = 0; c < v.n; ++c) {
        const int64_t i = b + c * v.post;
        d[i] = softmax ? (s[i] - lp[i]) * g[r] : -lp[i] * g[r] / s[i];
      }
    }
    return absl::OkStatus();
  }
  const int64_t* lp = label->data<int64_t>();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  for (int64_t r = 0; r < v.rows(); ++r) {
    const int64_t b = v.Base(r);
    if (lp[r] == ignore) {
      for (int64_t c = 0; c < v.n; ++c) d[b + c * v.post] = 0;
      continue;
    }
    OAR_RETURN_IF_ERROR(CheckLabelValue(ctx, lp[r], r, v.n));
    const int64_t hit = b + lp[r] * v.post;
    if (!softmax) {
      const T p = s[hit];  // read first: Logits@GRAD may be bound to Softmax (Fluid's in-place pair)
      for (int64_t c = 0; c < v.n; ++c) d[b + c * v.post] = 0;
      d[hit] = -g[r] / p;
      continue;
    }
    for (int64_t c = 0; c < v.n; ++c) d[b + c * v.post] = s[b + c * v.post] * g[r];
    d[hit] -= g[r];
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterSoftmaxOps(OpRegistry* r) {
  r->Register("softmax")
      .Input("X")
      .Output("Out")
      .Attr("axis", int32_t{-1})
      .Attr("use_cudnn", false)
      .Attr("use_mkldnn", false)
      .Attr("is_test", false)
      .SetInferShape(SoftmaxInferShape)
      .SetGradMaker(GradOpMaker({}, {"Out"}, {"Out"}, {"X"}))
      .Kernel<float>(SoftmaxKernel<float>)
      .Kernel<double>(SoftmaxKernel<double>);
  r->Register("log_softmax")
      .Input("X")
      .Output("Out")
      .Attr("axis", int32_t{-1})
      .Attr("use_mkldnn", false)
      .SetInferShape(SoftmaxInferShape)
      .SetGradMaker(GradOpMaker({}, {"Out"}, {"Out"}, {"X"}))
      .Kernel<float>(LogSoftmaxKernel<float>)
      .Kernel<double>(LogSoftmaxKernel<double>);
  r->Register("log_softmax_grad")
      .Input("Out")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("axis", int32_t{-1})
      .Attr("use_mkldnn", false)
      .SetInferShape(SoftmaxGradInferShape)
      .Kernel<float>(LogSoftmaxGradKernel<float>)
      .Kernel<double>(LogSoftmaxGradKernel<double>);
  r->Register("softmax_grad")
      .Input("Out")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("axis", int32_t{-1})
      .Attr("use_cudnn", false)
      .Attr("use_mkldnn", false)
      .Attr("is_test", false)
      .SetInferShape(SoftmaxGradInferShape)
      .Kernel<float>(SoftmaxGradKernel<float>)
      .Kernel<double>(SoftmaxGradKernel<double>);

  r->Register("softmax_with_cross_entropy")
      .Input("Logits")
      .Input("Label")
      .Output("Softmax")
      .Output("Loss")
      .Attr("soft_label", false)
      .Attr("ignore_index", int32_t{-100})
      .Attr("numeric_stable_mode", true)
      .Attr("axis", int32_t{-1})
      .Attr("use_softmax", true)
      .SetInferShape(SwceInferShape)
      .SetGradMaker(GradOpMaker({"Label"}, {"Softmax"}, {"Loss"}, {"Logits"}))
      .Kernel<float>(SwceKernel<float>)
      .Kernel<double>(SwceKernel<double>);
  // Loss and Softmax@GRAD: Fluid 1.0-1.4's grad makers passed them too; no kernel reads them.
  r->Register("softmax_with_cross_entropy_grad")
      .Input("Label")
      .Input("Softmax")
      .Input("Loss", kDispensable)
      .Input(GradVarName("Softmax"), kDispensable)
      .Input(GradVarName("Loss"))
      .Output(GradVarName("Logits"), kDispensable)
      .Attr("soft_label", false)
      .Attr("ignore_index", int32_t{-100})
      .Attr("numeric_stable_mode", true)
      .Attr("axis", int32_t{-1})
      .Attr("use_softmax", true)
      .SetInferShape(SwceGradInferShape)
      .Kernel<float>(SwceGradKernel<float>)
      .Kernel<double>(SwceGradKernel<double>);
}

}  // namespace oar
