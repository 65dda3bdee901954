// lamb (paddle.optimizer.Lamb): adam's moments, bias-corrected, plus the
// decoupled weight decay give the step r = m̂ / (√v̂ + ε) + wd·p, which is
// scaled by the trust ratio ‖p‖ / ‖r‖ (1 where either norm is 0, and
// without weight decay unless always_adapt) and the learning rate. The beta powers advance after the step
// (Beta1PowOut). A sparse gradient is densified. Norms are summed in double.
//
// Thread-safety: a stateless kernel.
#include <cmath>
#include <vector>

#include "common/framework/op_registry.h"
#include "common/ops/ops.h"
#include "common/ops/optimizer_util.h"

namespace oar {
namespace {

using namespace optimizer_util;  // NOLINT

absl::Status LambShape(InferShapeContext& ctx) {
  return InferUpdateShape(ctx, {"Grad", "Moment1", "Moment2"}, {"ParamOut", "Moment1Out", "Moment2Out"},
                          {"Beta1Pow", "Beta2Pow"});
}

template <typename T>
absl::Status LambKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(GradView<T> g, ReadGrad<T>(ctx, *param, /*densify=*/true));
  OAR_ASSIGN_OR_RETURN(const T* lr, In<T>(ctx, "LearningRate"));
  OAR_ASSIGN_OR_RETURN(const T* m1, In<T>(ctx, "Moment1"));
  OAR_ASSIGN_OR_RETURN(const T* m2, In<T>(ctx, "Moment2"));
  OAR_ASSIGN_OR_RETURN(const T* b1p, In<T>(ctx, "Beta1Pow"));
  OAR_ASSIGN_OR_RETURN(const T* b2p, In<T>(ctx, "Beta2Pow"));
  const T b1 = static_cast<T>(ctx.Attr<float>("beta1")), b2 = static_cast<T>(ctx.Attr<float>("beta2"));
  const T eps = static_cast<T>(ctx.Attr<float>("epsilon")), wd = static_cast<T>(ctx.Attr<float>("weight_decay"));
  const T beta1_pow = b1p[0], beta2_pow = b2p[0];
  const int64_t n = param->numel();
  const T* p = param->data<T>();
  T* m1out = Out<T>(ctx, "Moment1Out", *param);
  T* m2out = Out<T>(ctx, "Moment2Out", *param);
  std::vector<T> r(static_cast<size_t>(n));
  double p_norm = 0, r_norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g.dense[i];
    const T a = b1 * m1[i] + (T(1) - b1) * gi, b = b2 * m2[i] + (T(1) - b2) * gi * gi;
    m1out[i] = a;
    m2out[i] = b;
    r[static_cast<size_t>(i)] = (a / (T(1) - beta1_pow)) / (std::sqrt(b / (T(1) - beta2_pow)) + eps) + wd * p[i];
    p_norm += static_cast<double>(p[i]) * p[i];
    r_norm += static_cast<double>(r[static_cast<size_t>(i)]) * r[static_cast<size_t>(i)];
  }
  p_norm = std::sqrt(p_norm);
  r_norm = std::sqrt(r_norm);
  // Paddle adapts the step only with weight decay, or when asked to always.
  const bool adapt = wd > T(0) || ctx.Attr<bool>("always_adapt");
  const T ratio = adapt && p_norm > 0 && r_norm > 0 ? static_cast<T>(p_norm / r_norm) : T(1);
  T* pout = Out<T>(ctx, "ParamOut", *param);
  for (int64_t i = 0; i < n; ++i) pout[i] = p[i] - lr[0] * ratio * r[static_cast<size_t>(i)];
  if (Tensor* t = ctx.Output("Beta1PowOut")) t->mutable_data<T>(DDim{1})[0] = beta1_pow * b1;
  if (Tensor* t = ctx.Output("Beta2PowOut")) t->mutable_data<T>(DDim{1})[0] = beta2_pow * b2;
  return absl::OkStatus();
}

}  // namespace

void RegisterLambOp(OpRegistry* r) {
  r->Register("lamb")
      .Input("Param")
      .Input("Grad")
      .Input("LearningRate")
      .Input("Moment1")
      .Input("Moment2")
      .Input("Beta1Pow")
      .Input("Beta2Pow")
      .Output("ParamOut")
      .Output("Moment1Out")
      .Output("Moment2Out")
      .Output("Beta1PowOut", kDispensable)
      .Output("Beta2PowOut", kDispensable)
      .Input("MasterParam", kUnimplemented)
      .Input("SkipUpdate", kUnimplemented)
      .Output("MasterParamOut", kUnimplemented)
      .Attr("weight_decay", 0.01f)
      .Attr("beta1", 0.9f)
      .Attr("beta2", 0.999f)
      .Attr("epsilon", 1e-6f)
      .Attr("always_adapt", false)
      .Attr("multi_precision", false)
      .Implements("multi_precision", {false})
      .SetInferShape(LambShape)
      .Kernel<float>(LambKernel<float>)
      .Kernel<double>(LambKernel<double>);
}

}  // namespace oar
