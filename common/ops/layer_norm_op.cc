// layer_norm and layer_norm_grad as Fluid and Paddle define them: X viewed as
// [left, right] at begin_norm_axis; each row normalized by its own mean and
// variance (Mean and Variance outputs, [left]), then scaled by Scale and
// shifted by Bias ([right], each optional). Sums in double.
//
// Thread-safety: stateless kernels.
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

absl::StatusOr<std::pair<int64_t, int64_t>> Split(const std::string& type, const DDim& x, int axis) {
  if (axis < 1 || axis > x.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, ": begin_norm_axis ", axis, " is outside [1, ", x.size(), "] for X", x.ToString()));
  }
  return std::make_pair(x.Product(0, axis), x.Product(axis, x.size()));
}

absl::Status LayerNormShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  const int axis = ctx.Attr<int32_t>("begin_norm_axis");
  if (axis < 1 || axis > x.size()) {
    return ctx.Error("begin_norm_axis ", axis, " is outside [1, ", x.size(), "] for X", x.ToString());
  }
  const int64_t left = x.HasUnknown() ? -1 : x.Product(0, axis), right = x.Product(axis, x.size());
  for (const char* slot : {"Scale", "Bias"}) {
    if (ctx.HasInput(slot) && !x.HasUnknown()) OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, slot, DDim{right}));
  }
  ctx.SetOutputDim("Y", x);
  ctx.SetOutputDtype("Y", ctx.InputDtype("X"));
  ctx.SetOutputDim("Mean", DDim{left});
  ctx.SetOutputDim("Variance", DDim{left});
  return absl::OkStatus();
}

// The [right]-sized Scale or Bias, or null when not given.
template <typename T>
absl::StatusOr<const T*> Optional(const ExecutionContext& ctx, const char* slot, int64_t right) {
  const Tensor* t = ctx.Input(slot);
  if (t == nullptr || !t->initialized()) return static_cast<const T*>(nullptr);
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, slot, 0, *t));
  if (t->numel() != right) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), slot),
                                                   t->dims().ToString(), " should hold ", right, " values"));
  }
  return t->data<T>();
}

// A row's mean and variance (divided by its length), in double.
template <typename T>
std::pair<double, double> RowStats(const T* row, int64_t n) {
  double m = 0, v = 0;
  for (int64_t j = 0; j < n; ++j) m += row[j];
  m /= n;
  for (int64_t j = 0; j < n; ++j) v += (row[j] - m) * (row[j] - m);
  return {m, v / n};
}

template <typename T>
absl::Status LayerNormKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, *x));
  OAR_ASSIGN_OR_RETURN(auto lr, Split(ctx.op().type, x->dims(), ctx.Attr<int32_t>("begin_norm_axis")));
  const auto [left, right] = lr;
  OAR_ASSIGN_OR_RETURN(const T* scale, Optional<T>(ctx, "Scale", right));
  OAR_ASSIGN_OR_RETURN(const T* bias, Optional<T>(ctx, "Bias", right));
  const double eps = ctx.Attr<float>("epsilon");
  const T* xp = x->data<T>();
  T* y = ctx.Output("Y")->mutable_data<T>(x->dims());
  T* mean = ctx.Output("Mean") ? ctx.Output("Mean")->mutable_data<T>(DDim{left}) : nullptr;
  T* var = ctx.Output("Variance") ? ctx.Output("Variance")->mutable_data<T>(DDim{left}) : nullptr;
  for (int64_t i = 0; i < left; ++i) {
    const T* row = xp + i * right;
    const auto [m, v] = RowStats(row, right);
    const double rstd = 1 / std::sqrt(v + eps);
    for (int64_t j = 0; j < right; ++j) {
      double h = (row[j] - m) * rstd;
      if (scale) h *= scale[j];
      if (bias) h += bias[j];
      y[i * right + j] = static_cast<T>(h);
    }
    if (mean) mean[i] = static_cast<T>(m);
    if (var) var[i] = static_cast<T>(v);
  }
  return absl::OkStatus();
}

absl::Status LayerNormGradShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(ExpectLikeInput(ctx, GradVarName("Y"), "X"));
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim("X"));
  if (ctx.HasInput("Scale")) ctx.SetOutputDim(GradVarName("Scale"), ctx.InputDim("Scale"));
  if (ctx.HasInput("Bias")) ctx.SetOutputDim(GradVarName("Bias"), ctx.InputDim("Bias"));
  if (!ctx.HasInput("Bias") && ctx.HasInput("Scale")) ctx.SetOutputDim(GradVarName("Bias"), ctx.InputDim("Scale"));
  return absl::OkStatus();
}

// Recomputes each row's statistics from X (as Mean and Variance hold them,
// in double): dX = rstd * (dŷ - mean(dŷ) - x̂ * mean(dŷ x̂)), dŷ = dY * Scale.
template <typename T>
absl::Status LayerNormGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, GradVarName("Y")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, *x));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Y"), 0, *dy));
  OAR_ASSIGN_OR_RETURN(auto lr, Split(ctx.op().type, x->dims(), ctx.Attr<int32_t>("begin_norm_axis")));
  const auto [left, right] = lr;
  if (dy->numel() != x->numel()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), GradVarName("Y")),
                                                   dy->dims().ToString(), " differs from X", x->dims().ToString()));
  }
  OAR_ASSIGN_OR_RETURN(const T* scale, Optional<T>(ctx, "Scale", right));
  const double eps = ctx.Attr<float>("epsilon");
  Tensor* dx_t = ctx.Output(GradVarName("X"));
  Tensor* ds_t = ctx.Output(GradVarName("Scale"));
  Tensor* db_t = ctx.Output(GradVarName("Bias"));
  T* dx = dx_t ? dx_t->mutable_data<T>(x->dims()) : nullptr;
  std::vector<double> ds(ds_t ? right : 0, 0.0), db(db_t ? right : 0, 0.0), xhat(right), dyh(right);
  const T* xp = x->data<T>();
  const T* gp = dy->data<T>();
  for (int64_t i = 0; i < left; ++i) {
    const T* row = xp + i * right;
    const T* g = gp + i * right;
    const auto [m, v] = RowStats(row, right);
    const double rstd = 1 / std::sqrt(v + eps);
    double mean_dyh = 0, mean_dyh_xhat = 0;
    for (int64_t j = 0; j < right; ++j) {
      xhat[j] = (row[j] - m) * rstd;
      dyh[j] = g[j] * (scale ? scale[j] : T(1));
      mean_dyh += dyh[j];
      mean_dyh_xhat += dyh[j] * xhat[j];
      if (!ds.empty()) ds[j] += g[j] * xhat[j];
      if (!db.empty()) db[j] += g[j];
    }
    mean_dyh /= right;
    mean_dyh_xhat /= right;
    if (dx) {
      for (int64_t j = 0; j < right; ++j) {
        dx[i * right + j] = static_cast<T>(rstd * (dyh[j] - mean_dyh - xhat[j] * mean_dyh_xhat));
      }
    }
  }
  if (ds_t) {
    T* p = ds_t->mutable_data<T>(DDim{right});
    for (int64_t j = 0; j < right; ++j) p[j] = static_cast<T>(ds[j]);
  }
  if (db_t) {
    T* p = db_t->mutable_data<T>(DDim{right});
    for (int64_t j = 0; j < right; ++j) p[j] = static_cast<T>(db[j]);
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterLayerNormOps(OpRegistry* r) {
  auto attrs = [](OpInfo& info) -> OpInfo& {
    return info.Attr("epsilon", 1e-5f)
        .Attr("begin_norm_axis", int32_t{1})
        .Attr("use_mkldnn", false)
        .Attr("is_test", false);
  };
  attrs(r->Register("layer_norm")
            .NotInPlace()
            .Input("X")
            .Input("Scale", kDispensable)
            .Input("Bias", kDispensable)
            .Output("Y")
            .Output("Mean", kDispensable)
            .Output("Variance", kDispensable))
      .SetInferShape(LayerNormShape)
      .SetGradMaker(GradOpMaker({"X", "Scale", "Bias"}, {"Mean", "Variance"}, {"Y"}, {"X", "Scale", "Bias"}))
      .Kernel<float>(LayerNormKernel<float>)
      .Kernel<double>(LayerNormKernel<double>);
  attrs(r->Register("layer_norm_grad")
            .NotInPlace()
            .Input("X")
            .Input("Scale", kDispensable)
            .Input("Bias", kDispensable)
            .Input("Mean", kDispensable)
            .Input("Variance", kDispensable)
            .Input(GradVarName("Y"))
            .Output(GradVarName("X"), kDispensable)
            .Output(GradVarName("Scale"), kDispensable)
            .Output(GradVarName("Bias"), kDispensable))
      .SetInferShape(LayerNormGradShape)
      .Kernel<float>(LayerNormGradKernel<float>)
      .Kernel<double>(LayerNormGradKernel<double>);
}

}  // namespace oar
