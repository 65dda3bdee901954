// batch_norm over NCHW (or NC) in training and is_test modes, with Fluid's
// outputs: Y, MeanOut/VarianceOut (running statistics, in place),
// SavedMean and SavedVariance (the batch mean and inverse std for the grad).
#include <cmath>

#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// [N, C, HW] view of X.
struct NCHW {
  int64_t n, c, hw;
};
NCHW View(const DDim& d) { return {d[0], d[1], d.Product(2, d.size())}; }

absl::Status BatchNormInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X");
  if (x.size() < 2 || x.size() > 5) return ctx.Error("X", x.ToString(), " must have rank 2 to 5");
  if (ctx.Attr<std::string>("data_layout") != "NCHW") {
    return ctx.Error("data_layout '", ctx.Attr<std::string>("data_layout"), "' is not supported (NCHW only)");
  }
  const int64_t c = x[1];
  for (const char* s : {"Scale", "Bias", "Mean", "Variance"}) {
    DDim d = ctx.InputDim(s);
    if (d.size() != 1 || (c >= 0 && d[0] != c))
      return ctx.Error(s, d.ToString(), " must be [", c, "] for X", x.ToString());
  }
  ctx.SetOutputDim("Y", x);
  ctx.SetOutputDtype("Y", ctx.InputDtype("X"));
  for (const char* s : {"MeanOut", "VarianceOut", "SavedMean", "SavedVariance"}) {
    ctx.SetOutputDim(s, DDim{c});
    ctx.SetOutputDtype(s, ctx.InputDtype("X"));
  }
  ctx.ShareLoD("X", "Y");
  return absl::OkStatus();
}

template <typename T>
absl::Status BatchNormKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* scale, RequireInput(ctx, "Scale"));
  OAR_ASSIGN_OR_RETURN(const Tensor* bias, RequireInput(ctx, "Bias"));
  OAR_ASSIGN_OR_RETURN(const Tensor* mean, RequireInput(ctx, "Mean"));
  OAR_ASSIGN_OR_RETURN(const Tensor* var, RequireInput(ctx, "Variance"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, *x));
  for (const auto& [slot, t] :
       {std::pair<const char*, const Tensor*>{"Scale", scale}, {"Bias", bias}, {"Mean", mean}, {"Variance", var}}) {
    OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, slot, 0, *t));
  }
  const NCHW v = View(x->dims());
  const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  const T mom = static_cast<T>(ctx.Attr<float>("momentum"));
  const bool global = ctx.Attr<bool>("is_test") || ctx.Attr<bool>("use_global_stats");
  const T* xp = x->data<T>();
  const T* sp = scale->data<T>();
  const T* bp = bias->data<T>();
  T* y = ctx.Output("Y")->mutable_data<T>();
  std::vector<T> m(v.c), inv(v.c);
  if (global) {
    for (int64_t c = 0; c < v.c; ++c) {
      m[c] = mean->data<T>()[c];
      inv[c] = T(1) / std::sqrt(var->data<T>()[c] + eps);
    }
  } else {
    const T count = T(v.n * v.hw);
    std::vector<T> sq(v.c, T(0));
    std::fill(m.begin(), m.end(), T(0));
    for (int64_t n = 0; n < v.n; ++n) {
      for (int64_t c = 0; c < v.c; ++c) {
        const T* row = xp + (n * v.c + c) * v.hw;
        for (int64_t i = 0; i < v.hw; ++i) m[c] += row[i];
      }
    }
    for (auto& mc : m) mc /= count;
    for (int64_t n = 0; n < v.n; ++n) {
      for (int64_t c = 0; c < v.c; ++c) {
        const T* row = xp + (n * v.c + c) * v.hw;
        for (int64_t i = 0; i < v.hw; ++i) sq[c] += (row[i] - m[c]) * (row[i] - m[c]);
      }
    }
    // Running statistics: read the inputs before writing (MeanOut aliases Mean).
    std::vector<T> rm(v.c), rv(v.c);
    for (int64_t c = 0; c < v.c; ++c) {
      const T batch_var = sq[c] / count;
      inv[c] = T(1) / std::sqrt(batch_var + eps);
      rm[c] = mean->data<T>()[c] * mom + m[c] * (T(1) - mom);
      rv[c] = var->data<T>()[c] * mom + batch_var * (T(1) - mom);
    }
    if (Tensor* t = ctx.Output("MeanOut")) std::copy(rm.begin(), rm.end(), t->mutable_data<T>());
    if (Tensor* t = ctx.Output("VarianceOut")) std::copy(rv.begin(), rv.end(), t->mutable_data<T>());
  }
  if (Tensor* t = ctx.Output("SavedMean")) std::copy(m.begin(), m.end(), t->mutable_data<T>());
  if (Tensor* t = ctx.Output("SavedVariance")) std::copy(inv.begin(), inv.end(), t->mutable_data<T>());
  for (int64_t n = 0; n < v.n; ++n) {
    for (int64_t c = 0; c < v.c; ++c) {
      const int64_t o = (n * v.c + c) * v.hw;
      const T a = sp[c] * inv[c], b = bp[c] - m[c] * a;
      for (int64_t i = 0; i < v.hw; ++i) y[o + i] = xp[o + i] * a + b;
    }
  }
  return absl::OkStatus();
}

// Scale, Bias and the saved statistics hold one value per channel of X;
// Y@GRAD has X's shape.
absl::Status BatchNormGradInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  if (x.size() < 2 || x.size() > 5) return ctx.Error("X", x.ToString(), " must have rank 2 to 5");
  for (const char* s : {"Scale", "Bias", "SavedMean", "SavedVariance"}) {
    OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, s, DDim{x[1]}));
  }
  OAR_RETURN_IF_ERROR(ExpectLikeInput(ctx, GradVarName("Y"), "X"));
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim("X"));
  ctx.SetOutputDim(GradVarName("Scale"), ctx.InputDim("Scale"));
  ctx.SetOutputDim(GradVarName("Bias"), ctx.InputDim("Scale"));
  return absl::OkStatus();
}

template <typename T>
absl::Status BatchNormGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* scale, RequireInput(ctx, "Scale"));
  OAR_ASSIGN_OR_RETURN(const Tensor* saved_mean, RequireInput(ctx, "SavedMean"));
  OAR_ASSIGN_OR_RETURN(const Tensor* saved_inv, RequireInput(ctx, "SavedVariance"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dy_t, RequireInput(ctx, GradVarName("Y")));
  for (const auto& [slot, t] : {std::pair<std::string, const Tensor*>{"X", x},
                                {"Scale", scale},
                                {"SavedMean", saved_mean},
                                {"SavedVariance", saved_inv},
                                {GradVarName("Y"), dy_t}}) {
    OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, slot, 0, *t));
  }
  const NCHW v = View(x->dims());
  const bool global = ctx.Attr<bool>("use_global_stats");
  const T* xp = x->data<T>();
  const T* dy = dy_t->data<T>();
  const T* sp = scale->data<T>();
  const T* m = saved_mean->data<T>();
  const T* inv = saved_inv->data<T>();
  std::vector<T> sum_dy(v.c, T(0)), sum_dy_xhat(v.c, T(0));
  for (int64_t n = 0; n < v.n; ++n) {
    for (int64_t c = 0; c < v.c; ++c) {
      const int64_t o = (n * v.c + c) * v.hw;
      for (int64_t i = 0; i < v.hw; ++i) {
        sum_dy[c] += dy[o + i];
        sum_dy_xhat[c] += dy[o + i] * (xp[o + i] - m[c]) * inv[c];
      }
    }
  }
  if (Tensor* t = ctx.Output(GradVarName("Scale")))
    std::copy(sum_dy_xhat.begin(), sum_dy_xhat.end(), t->mutable_data<T>());
  if (Tensor* t = ctx.Output(GradVarName("Bias"))) std::copy(sum_dy.begin(), sum_dy.end(), t->mutable_data<T>());
  Tensor* dx_t = ctx.Output(GradVarName("X"));
  if (dx_t == nullptr) return absl::OkStatus();
  T* dx = dx_t->mutable_data<T>();
  const T count = T(v.n * v.hw);
  for (int64_t n = 0; n < v.n; ++n) {
    for (int64_t c = 0; c < v.c; ++c) {
      const int64_t o = (n * v.c + c) * v.hw;
      const T k = sp[c] * inv[c];
      for (int64_t i = 0; i < v.hw; ++i) {
        if (global) {
          dx[o + i] = dy[o + i] * k;
        } else {
          const T xhat = (xp[o + i] - m[c]) * inv[c];
          dx[o + i] = k * (dy[o + i] - sum_dy[c] / count - xhat * sum_dy_xhat[c] / count);
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterBatchNormOps(OpRegistry* r) {
  auto attrs = [](OpInfo& info) -> OpInfo& {
    return info.Attr("momentum", 0.9f)
        .Attr("epsilon", 1e-5f)
        .Attr("is_test", false)
        .Attr("data_layout", std::string("NCHW"))
        .Attr("use_global_stats", false)
        .Attr("fuse_with_relu", false)
        .Attr("use_mkldnn", false)
        .Attr("trainable_statistics", false)
        .Implements("trainable_statistics", {false})
        .Implements("fuse_with_relu", {false});
  };
  // Paddle 2.x adds MomentumTensor (unimplemented: the momentum attribute
  // is used) and ReserveSpace (a cuDNN workspace; never written here, and
  // the grad, which also names Mean/Variance(Out), reads none of them).
  attrs(r->Register("batch_norm")
            .Input("X")
            .Input("Scale")
            .Input("Bias")
            .Input("Mean")
            .Input("Variance")
            .Input("MomentumTensor", kUnimplemented)
            .Output("Y")
            .Output("MeanOut")
            .Output("VarianceOut")
            .Output("SavedMean")
            .Output("SavedVariance")
            .Output("ReserveSpace", kDispensable))
      .SetInferShape(BatchNormInferShape)
      .SetGradMaker(GradOpMaker({"X", "Scale", "Bias"}, {"SavedMean", "SavedVariance"}, {"Y"}, {"X", "Scale", "Bias"}))
      .Kernel<float>(BatchNormKernel<float>)
      .Kernel<double>(BatchNormKernel<double>);
  attrs(r->Register("batch_norm_grad")
            .Input("X")
            .Input("Scale")
            .Input("Bias")
            .Input("SavedMean")
            .Input("SavedVariance")
            .Input(GradVarName("Y"))
            .Input("Mean", kDispensable)
            .Input("Variance", kDispensable)
            .Input("MeanOut", kDispensable)
            .Input("VarianceOut", kDispensable)
            .Input("ReserveSpace", kDispensable)
            .Output(GradVarName("X"), kDispensable)
            .Output(GradVarName("Scale"), kDispensable)
            .Output(GradVarName("Bias"), kDispensable))
      .SetInferShape(BatchNormGradInferShape)
      .Kernel<float>(BatchNormGradKernel<float>)
      .Kernel<double>(BatchNormGradKernel<double>);
}

}  // namespace oar
