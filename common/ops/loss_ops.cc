// softmax, cross_entropy (hard int64 labels or soft labels),
// softmax_with_cross_entropy and mean, with gradients.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// log() that stays finite for probabilities that underflowed to 0.
template <typename T>
T SafeLog(T p) {
  return std::log(std::max(p, std::numeric_limits<T>::min()));
}

// Rows along the last axis: [rows, classes].
std::pair<int64_t, int64_t> RowsCols(const DDim& d) {
  int64_t cols = d.size() ? d[d.size() - 1] : 1;
  return {cols ? d.numel() / cols : 0, cols};
}

// Fluid's softmax takes `axis`; Oar supports the last axis, the only one
// Fluid 1.x's kernels accepted.
absl::Status CheckLastAxis(InferShapeContext& ctx, const DDim& d) {
  int axis = ctx.Attr<int32_t>("axis");
  if (axis != -1 && axis != d.size() - 1) {
    return ctx.Error("only the last axis is supported, got axis=", axis, " for rank ", d.size());
  }
  return absl::OkStatus();
}

template <typename T>
void SoftmaxRows(const T* x, T* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    T mx = *std::max_element(xr, xr + cols);
    T sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += (yr[c] = std::exp(xr[c] - mx));
    T inv = T(1) / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
}

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
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim("Out"));
  return absl::OkStatus();
}

template <typename T>
absl::Status SoftmaxGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
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

// ---- label checks shared by the cross-entropy ops ----

absl::Status CheckLabelShape(InferShapeContext& ctx, const DDim& x, const DDim& label,
                             const char* x_slot) {
  bool soft = ctx.Attr<bool>("soft_label");
  if (x.size() != label.size()) {
    return ctx.Error("Label", label.ToString(), " must have the rank of ", x_slot, x.ToString());
  }
  for (int i = 0; i + 1 < x.size(); ++i) {
    if (x[i] >= 0 && label[i] >= 0 && x[i] != label[i]) {
      return ctx.Error("Label", label.ToString(), " and ", x_slot, x.ToString(),
                       " differ in dimension ", i);
    }
  }
  int64_t last = label[label.size() - 1];
  if (!soft && last != 1 && last >= 0) {
    return ctx.Error("hard Label", label.ToString(), " must have last dimension 1");
  }
  if (soft && last >= 0 && x[x.size() - 1] >= 0 && last != x[x.size() - 1]) {
    return ctx.Error("soft Label", label.ToString(), " must match ", x_slot, x.ToString());
  }
  return absl::OkStatus();
}

DDim LossDims(const DDim& x) {
  DDim d = x;
  d[d.size() - 1] = 1;
  return d;
}

// Validates a hard label value against the class count.
absl::Status CheckLabelValue(const ExecutionContext& ctx, int64_t label, int64_t row,
                             int64_t classes) {
  if (label < 0 || label >= classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        ctx.op().type, ": label ", label, " in row ", row, " is outside [0, ", classes, ")"));
  }
  return absl::OkStatus();
}

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
    if (lp[r] == ignore) { y[r] = 0; continue; }
    OAR_RETURN_IF_ERROR(CheckLabelValue(ctx, lp[r], r, cols));
    y[r] = -SafeLog(xp[r * cols + lp[r]]);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status CrossEntropyGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, GradVarName("Y")));
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
  SoftmaxRows(x->data<T>(), sm, rows, cols);
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
  ctx.SetOutputDim(GradVarName("Logits"), ctx.InputDim("Softmax"));
  return absl::OkStatus();
}

template <typename T>
absl::Status SwceGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* sm, RequireInput(ctx, "Softmax"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dloss, RequireInput(ctx, GradVarName("Loss")));
  Tensor* dx = ctx.Output(GradVarName("Logits"));
  if (dx == nullptr) return absl::OkStatus();
  auto [rows, cols] = RowsCols(sm->dims());
  const T* s = sm->data<T>();
  const T* g = dloss->data<T>();
  T* d = dx->mutable_data<T>();
  if (ctx.Attr<bool>("soft_label")) {
    const T* lp = label->data<T>();
    for (int64_t i = 0; i < rows * cols; ++i) d[i] = (s[i] - lp[i]) * g[i / cols];
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
    for (int64_t c = 0; c < cols; ++c) d[o + c] = s[o + c] * g[r];
    d[o + lp[r]] -= g[r];
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

template <typename T>
absl::Status MeanGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
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

  r->Register("cross_entropy").Input("X").Input("Label").Output("Y")
      .Attr("soft_label", false).Attr("ignore_index", int32_t{-100})
      .SetInferShape(CrossEntropyInferShape)
      .SetGradMaker(GradOpMaker({"X", "Label"}, {}, {"Y"}, {"X"}))
      .Kernel<float>(CrossEntropyKernel<float>).Kernel<double>(CrossEntropyKernel<double>);
  r->Register("cross_entropy_grad").Input("X").Input("Label").Input(GradVarName("Y"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("soft_label", false).Attr("ignore_index", int32_t{-100})
      .SetInferShape(GradSameShapeAsX)
      .Kernel<float>(CrossEntropyGradKernel<float>).Kernel<double>(CrossEntropyGradKernel<double>);

  r->Register("softmax_with_cross_entropy").Input("Logits").Input("Label")
      .Output("Softmax").Output("Loss")
      .Attr("soft_label", false).Attr("ignore_index", int32_t{-100})
      .Attr("numeric_stable_mode", true).Attr("axis", int32_t{-1})
      .SetInferShape(SwceInferShape)
      .SetGradMaker(GradOpMaker({"Label"}, {"Softmax"}, {"Loss"}, {"Logits"}))
      .Kernel<float>(SwceKernel<float>).Kernel<double>(SwceKernel<double>);
  r->Register("softmax_with_cross_entropy_grad").Input("Label").Input("Softmax")
      .Input(GradVarName("Loss")).Output(GradVarName("Logits"), kDispensable)
      .Attr("soft_label", false).Attr("ignore_index", int32_t{-100})
      .Attr("numeric_stable_mode", true).Attr("axis", int32_t{-1})
      .SetInferShape(SwceGradInferShape)
      .Kernel<float>(SwceGradKernel<float>).Kernel<double>(SwceGradKernel<double>);

  r->Register("mean").Input("X").Output("Out").SetInferShape(MeanInferShape)
      .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
      .Kernel<float>(MeanKernel<float>).Kernel<double>(MeanKernel<double>);
  r->Register("mean_grad").Input("X").Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable).SetInferShape(GradSameShapeAsX)
      .Kernel<float>(MeanGradKernel<float>).Kernel<double>(MeanGradKernel<double>);
}

}  // namespace oar
