// The rest of Fluid 1.x's update ops: adagrad (dense and sparse),
// decayed_adagrad, adamax, rmsprop (plain and centered), ftrl and
// lars_momentum. A sparse gradient given to the ops without a sparse path is
// densified, which is what their update means.
#include <cmath>

#include "common/framework/op_registry.h"
#include "common/ops/ops.h"
#include "common/ops/optimizer_util.h"
#include "common/ops/sparse_table_update.h"

namespace oar {
namespace {

using namespace optimizer_util;  // NOLINT

template <typename T>
absl::Status AdagradKernel(const ExecutionContext& ctx) {
  if (ParamIsTable(ctx)) return TableAdagrad(ctx);
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(GradView<T> g, ReadGrad<T>(ctx, *param, /*densify=*/false));
  OAR_ASSIGN_OR_RETURN(const T* mom, In<T>(ctx, "Moment"));
  OAR_ASSIGN_OR_RETURN(const T* lr, In<T>(ctx, "LearningRate"));
  const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  const T* p = param->data<T>();
  T* pout = Out<T>(ctx, "ParamOut", *param);
  T* mout = Out<T>(ctx, "MomentOut", *param);
  auto update = [&](int64_t i, T gi) {
    const T m = mom[i] + gi * gi;
    mout[i] = m;
    pout[i] = p[i] - lr[0] * gi / (std::sqrt(m) + eps);
  };
  if (!g.sparse()) {
    for (int64_t i = 0, n = param->numel(); i < n; ++i) update(i, g.dense[i]);
    return absl::OkStatus();
  }
  if (pout != p) std::copy(p, p + param->numel(), pout);
  if (mout != mom) std::copy(mom, mom + param->numel(), mout);
  const T* v = g.rows.value.template data<T>();
  for (size_t r = 0; r < g.rows.rows.size(); ++r) {
    for (int64_t k = 0; k < g.width; ++k) update(g.rows.rows[r] * g.width + k, v[r * g.width + k]);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status DecayedAdagradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(GradView<T> g, ReadGrad<T>(ctx, *param, true));
  OAR_ASSIGN_OR_RETURN(const T* mom, In<T>(ctx, "Moment"));
  OAR_ASSIGN_OR_RETURN(const T* lr, In<T>(ctx, "LearningRate"));
  const T decay = static_cast<T>(ctx.Attr<float>("decay")), eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  const T* p = param->data<T>();
  T* pout = Out<T>(ctx, "ParamOut", *param);
  T* mout = Out<T>(ctx, "MomentOut", *param);
  for (int64_t i = 0, n = param->numel(); i < n; ++i) {
    const T m = decay * mom[i] + (T(1) - decay) * g.dense[i] * g.dense[i];
    mout[i] = m;
    pout[i] = p[i] - lr[0] * g.dense[i] / (std::sqrt(m) + eps);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status AdamaxKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(GradView<T> g, ReadGrad<T>(ctx, *param, true));
  OAR_ASSIGN_OR_RETURN(const T* lr, In<T>(ctx, "LearningRate"));
  OAR_ASSIGN_OR_RETURN(const T* mom, In<T>(ctx, "Moment"));
  OAR_ASSIGN_OR_RETURN(const T* inf, In<T>(ctx, "InfNorm"));
  OAR_ASSIGN_OR_RETURN(const T* b1p, In<T>(ctx, "Beta1Pow"));
  const T b1 = static_cast<T>(ctx.Attr<float>("beta1")), b2 = static_cast<T>(ctx.Attr<float>("beta2"));
  const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  const T* p = param->data<T>();
  T* pout = Out<T>(ctx, "ParamOut", *param);
  T* mout = Out<T>(ctx, "MomentOut", *param);
  T* iout = Out<T>(ctx, "InfNormOut", *param);
  const T lr_t = lr[0] / (T(1) - b1p[0]);
  for (int64_t i = 0, n = param->numel(); i < n; ++i) {
    const T m = b1 * mom[i] + (T(1) - b1) * g.dense[i];
    const T u = std::max(b2 * inf[i] + eps, std::abs(g.dense[i]));
    mout[i] = m;
    iout[i] = u;
    pout[i] = p[i] - lr_t * m / u;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status RmspropKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(GradView<T> g, ReadGrad<T>(ctx, *param, true));
  OAR_ASSIGN_OR_RETURN(const T* ms, In<T>(ctx, "MeanSquare"));
  OAR_ASSIGN_OR_RETURN(const T* mom, In<T>(ctx, "Moment"));
  OAR_ASSIGN_OR_RETURN(const T* lr, In<T>(ctx, "LearningRate"));
  const bool centered = ctx.Attr<bool>("centered");
  const T* mg = nullptr;
  if (centered) {
    OAR_ASSIGN_OR_RETURN(mg, In<T>(ctx, "MeanGrad"));
    if (ctx.Output("MeanGradOut") == nullptr) {
      return absl::InvalidArgumentError("rmsprop: centered=true needs MeanGradOut (the updated MeanGrad)");
    }
  }
  const T rho = static_cast<T>(ctx.Attr<float>("decay")), eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  const T mu = static_cast<T>(ctx.Attr<float>("momentum"));
  const T* p = param->data<T>();
  T* pout = Out<T>(ctx, "ParamOut", *param);
  T* msout = Out<T>(ctx, "MeanSquareOut", *param);
  T* mout = Out<T>(ctx, "MomentOut", *param);
  T* mgout = centered ? Out<T>(ctx, "MeanGradOut", *param) : nullptr;
  for (int64_t i = 0, n = param->numel(); i < n; ++i) {
    const T gi = g.dense[i];
    const T s = rho * ms[i] + (T(1) - rho) * gi * gi;
    msout[i] = s;
    T denom = s + eps;
    if (centered) {
      const T a = rho * mg[i] + (T(1) - rho) * gi;
      mgout[i] = a;
      denom = s - a * a + eps;
    }
    const T m = mu * mom[i] + lr[0] * gi / std::sqrt(denom);
    mout[i] = m;
    pout[i] = p[i] - m;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status FtrlKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(GradView<T> g, ReadGrad<T>(ctx, *param, true));
  OAR_ASSIGN_OR_RETURN(const T* sq, In<T>(ctx, "SquaredAccumulator"));
  OAR_ASSIGN_OR_RETURN(const T* lin, In<T>(ctx, "LinearAccumulator"));
  OAR_ASSIGN_OR_RETURN(const T* lr, In<T>(ctx, "LearningRate"));
  const T l1 = static_cast<T>(ctx.Attr<float>("l1")), l2 = static_cast<T>(ctx.Attr<float>("l2"));
  const T power = static_cast<T>(ctx.Attr<float>("lr_power"));
  const T* p = param->data<T>();
  T* pout = Out<T>(ctx, "ParamOut", *param);
  T* sqout = Out<T>(ctx, "SquaredAccumOut", *param);
  T* linout = Out<T>(ctx, "LinearAccumOut", *param);
  const bool sqrt_power = power == T(-0.5);
  for (int64_t i = 0, n = param->numel(); i < n; ++i) {
    const T gi = g.dense[i];
    const T acc = sq[i] + gi * gi;
    const T sigma = sqrt_power ? (std::sqrt(acc) - std::sqrt(sq[i])) / lr[0]
                               : (std::pow(acc, -power) - std::pow(sq[i], -power)) / lr[0];
    const T l = lin[i] + gi - sigma * p[i];
    const T y = (sqrt_power ? std::sqrt(acc) : std::pow(acc, -power)) / lr[0] + T(2) * l2;
    const T x = l1 * (l > T(0) ? T(1) : (l < T(0) ? T(-1) : T(0))) - l;
    pout[i] = std::abs(l) > l1 ? x / y : T(0);
    sqout[i] = acc;
    linout[i] = l;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status LarsMomentumKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(GradView<T> g, ReadGrad<T>(ctx, *param, true));
  OAR_ASSIGN_OR_RETURN(const T* v, In<T>(ctx, "Velocity"));
  OAR_ASSIGN_OR_RETURN(const T* lr, In<T>(ctx, "LearningRate"));
  const T mu = static_cast<T>(ctx.Attr<float>("mu"));
  const T coeff = static_cast<T>(ctx.Attr<float>("lars_coeff"));
  const T wd = static_cast<T>(ctx.Attr<float>("lars_weight_decay"));
  const T* p = param->data<T>();
  const int64_t n = param->numel();
  T pn = 0, gn = 0;
  for (int64_t i = 0; i < n; ++i) {
    pn += p[i] * p[i];
    gn += g.dense[i] * g.dense[i];
  }
  pn = std::sqrt(pn);
  gn = std::sqrt(gn);
  const T local_lr = (pn > T(0) && gn > T(0)) ? lr[0] * coeff * pn / (gn + wd * pn) : lr[0];
  T* pout = Out<T>(ctx, "ParamOut", *param);
  T* vout = Out<T>(ctx, "VelocityOut", *param);
  for (int64_t i = 0; i < n; ++i) {
    const T nv = mu * v[i] + local_lr * (g.dense[i] + wd * p[i]);
    vout[i] = nv;
    pout[i] = p[i] - nv;
  }
  return absl::OkStatus();
}

absl::Status AdagradShape(InferShapeContext& c) {
  return InferUpdateShape(c, {"Grad", "Moment"}, {"ParamOut", "MomentOut"});
}
absl::Status AdamaxShape(InferShapeContext& c) {
  return InferUpdateShape(c, {"Grad", "Moment", "InfNorm"}, {"ParamOut", "MomentOut", "InfNormOut"}, {"Beta1Pow"});
}
absl::Status RmspropShape(InferShapeContext& c) {
  return InferUpdateShape(c, {"Grad", "MeanSquare", "Moment", "MeanGrad"},
                          {"ParamOut", "MeanSquareOut", "MomentOut", "MeanGradOut"});
}
absl::Status FtrlShape(InferShapeContext& c) {
  return InferUpdateShape(c, {"Grad", "SquaredAccumulator", "LinearAccumulator"},
                          {"ParamOut", "SquaredAccumOut", "LinearAccumOut"});
}
absl::Status LarsShape(InferShapeContext& c) {
  return InferUpdateShape(c, {"Grad", "Velocity"}, {"ParamOut", "VelocityOut"});
}

}  // namespace

#define OAR_FLOAT_KERNELS(fn) Kernel<float>(fn<float>).Kernel<double>(fn<double>)

void RegisterMoreOptimizerOps(OpRegistry* r) {
  // Paddle 2.x's adagrad and rmsprop also declare a master fp32 copy for
  // mixed precision, which Oar does not implement (it must stay empty/off).
  r->Register("adagrad")
      .Input("Param")
      .Input("Grad")
      .Input("Moment")
      .Input("LearningRate")
      .Output("ParamOut")
      .Output("MomentOut")
      .Attr("epsilon", 1e-6f)
      .Input("MasterParam", kUnimplemented)
      .Output("MasterParamOut", kUnimplemented)
      .Attr("multi_precision", false)
      .Implements("multi_precision", {false})
      .SetInferShape(AdagradShape)
      .OAR_FLOAT_KERNELS(AdagradKernel);
  r->Register("decayed_adagrad")
      .Input("Param")
      .Input("Grad")
      .Input("Moment")
      .Input("LearningRate")
      .Output("ParamOut")
      .Output("MomentOut")
      .Attr("decay", 0.95f)
      .Attr("epsilon", 1e-6f)
      .SetInferShape(AdagradShape)
      .OAR_FLOAT_KERNELS(DecayedAdagradKernel);
  r->Register("adamax")
      .Input("Param")
      .Input("Grad")
      .Input("LearningRate")
      .Input("Moment")
      .Input("InfNorm")
      .Input("Beta1Pow")
      .Output("ParamOut")
      .Output("MomentOut")
      .Output("InfNormOut")
      .Attr("beta1", 0.9f)
      .Attr("beta2", 0.999f)
      .Attr("epsilon", 1e-8f)
      .SetInferShape(AdamaxShape)
      .OAR_FLOAT_KERNELS(AdamaxKernel);
  r->Register("rmsprop")
      .Input("Param")
      .Input("MeanSquare")
      .Input("MeanGrad", kDispensable)
      .Input("LearningRate")
      .Input("Grad")
      .Input("Moment")
      .Output("ParamOut")
      .Output("MomentOut")
      .Output("MeanSquareOut")
      .Output("MeanGradOut", kDispensable)
      .Attr("epsilon", 1e-10f)
      .Attr("decay", 0.9f)
      .Attr("momentum", 0.0f)
      .Attr("centered", false)
      .Input("MasterParam", kUnimplemented)
      .Output("MasterParamOut", kUnimplemented)
      .Attr("multi_precision", false)
      .Implements("multi_precision", {false})
      .SetInferShape(RmspropShape)
      .OAR_FLOAT_KERNELS(RmspropKernel);
  r->Register("ftrl")
      .Input("Param")
      .Input("SquaredAccumulator")
      .Input("LinearAccumulator")
      .Input("Grad")
      .Input("LearningRate")
      .Output("ParamOut")
      .Output("SquaredAccumOut")
      .Output("LinearAccumOut")
      .Attr("l1", 0.0f)
      .Attr("l2", 0.0f)
      .Attr("lr_power", -0.5f)
      .SetInferShape(FtrlShape)
      .OAR_FLOAT_KERNELS(FtrlKernel);
  r->Register("lars_momentum")
      .Input("Param")
      .Input("Grad")
      .Input("Velocity")
      .Input("LearningRate")
      .Output("ParamOut")
      .Output("VelocityOut")
      .Attr("mu", 0.0f)
      .Attr("lars_coeff", 0.001f)
      .Attr("lars_weight_decay", 0.0005f)
      .SetInferShape(LarsShape)
      .OAR_FLOAT_KERNELS(LarsMomentumKernel);
}

#undef OAR_FLOAT_KERNELS

}  // namespace oar
