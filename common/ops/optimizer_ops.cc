// Dense optimizer update ops: sgd, momentum (optionally Nesterov), adam.
// Each updates its parameter in place (ParamOut names the Param variable).
#include <cmath>

#include "common/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// Checks that `slot` matches Param's shape and sets the "<slot>Out" shapes.
absl::Status CheckLike(InferShapeContext& ctx, const DDim& param, const std::string& slot) {
  DDim d = ctx.InputDim(slot);
  if (d.numel() >= 0 && param.numel() >= 0 && d.numel() != param.numel()) {
    const auto& args = ctx.op().Input(slot);
    return ctx.Error(slot, " ('", args.empty() ? "" : args[0], "')", d.ToString(),
                     " does not match Param ('", ctx.op().Input("Param")[0], "')",
                     param.ToString());
  }
  return absl::OkStatus();
}

absl::Status CheckLearningRate(InferShapeContext& ctx) {
  DDim lr = ctx.InputDim("LearningRate");
  if (lr.numel() != 1) return ctx.Error("LearningRate must hold one value, got ", lr.ToString());
  return absl::OkStatus();
}

absl::Status SgdInferShape(InferShapeContext& ctx) {
  DDim p = ctx.InputDim("Param");
  OAR_RETURN_IF_ERROR(CheckLike(ctx, p, "Grad"));
  OAR_RETURN_IF_ERROR(CheckLearningRate(ctx));
  ctx.SetOutputDim("ParamOut", p);
  return absl::OkStatus();
}

absl::Status MomentumInferShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(SgdInferShape(ctx));
  DDim p = ctx.InputDim("Param");
  OAR_RETURN_IF_ERROR(CheckLike(ctx, p, "Velocity"));
  ctx.SetOutputDim("VelocityOut", p);
  return absl::OkStatus();
}

absl::Status AdamInferShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(SgdInferShape(ctx));
  DDim p = ctx.InputDim("Param");
  OAR_RETURN_IF_ERROR(CheckLike(ctx, p, "Moment1"));
  OAR_RETURN_IF_ERROR(CheckLike(ctx, p, "Moment2"));
  for (const char* s : {"Beta1Pow", "Beta2Pow"}) {
    if (ctx.InputDim(s).numel() != 1) return ctx.Error(s, " must hold one value");
  }
  ctx.SetOutputDim("Moment1Out", p);
  ctx.SetOutputDim("Moment2Out", p);
  return absl::OkStatus();
}

// Dense tensors of an update op, with the dtype checked against T.
template <typename T>
absl::StatusOr<const T*> In(const ExecutionContext& ctx, const std::string& slot) {
  OAR_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, slot));
  OAR_RETURN_IF_ERROR(RequireDtype<T>(ctx, slot, *t));
  return t->data<T>();
}

template <typename T>
absl::Status SgdKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(const T* g, In<T>(ctx, "Grad"));
  OAR_ASSIGN_OR_RETURN(const T* lr, In<T>(ctx, "LearningRate"));
  const T* p = param->data<T>();
  T* out = ctx.Output("ParamOut")->mutable_data<T>();
  const T rate = lr[0];
  for (int64_t i = 0, n = param->numel(); i < n; ++i) out[i] = p[i] - rate * g[i];
  return absl::OkStatus();
}

template <typename T>
absl::Status MomentumKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(const T* g, In<T>(ctx, "Grad"));
  OAR_ASSIGN_OR_RETURN(const T* v, In<T>(ctx, "Velocity"));
  OAR_ASSIGN_OR_RETURN(const T* lr, In<T>(ctx, "LearningRate"));
  const T mu = static_cast<T>(ctx.Attr<float>("mu"));
  const bool nesterov = ctx.Attr<bool>("use_nesterov");
  const T* p = param->data<T>();
  T* pout = ctx.Output("ParamOut")->mutable_data<T>();
  T* vout = ctx.Output("VelocityOut")->mutable_data<T>();
  const T rate = lr[0];
  for (int64_t i = 0, n = param->numel(); i < n; ++i) {
    const T nv = mu * v[i] + g[i];
    vout[i] = nv;
    pout[i] = nesterov ? p[i] - (g[i] + mu * nv) * rate : p[i] - rate * nv;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status AdamKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(const T* g, In<T>(ctx, "Grad"));
  OAR_ASSIGN_OR_RETURN(const T* lr, In<T>(ctx, "LearningRate"));
  OAR_ASSIGN_OR_RETURN(const T* m1, In<T>(ctx, "Moment1"));
  OAR_ASSIGN_OR_RETURN(const T* m2, In<T>(ctx, "Moment2"));
  OAR_ASSIGN_OR_RETURN(const T* b1p, In<T>(ctx, "Beta1Pow"));
  OAR_ASSIGN_OR_RETURN(const T* b2p, In<T>(ctx, "Beta2Pow"));
  const T b1 = static_cast<T>(ctx.Attr<float>("beta1"));
  const T b2 = static_cast<T>(ctx.Attr<float>("beta2"));
  const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  const T* p = param->data<T>();
  T* pout = ctx.Output("ParamOut")->mutable_data<T>();
  T* m1out = ctx.Output("Moment1Out")->mutable_data<T>();
  T* m2out = ctx.Output("Moment2Out")->mutable_data<T>();
  // Fluid's bias-corrected step: lr_t = lr·√(1−β2ᵗ)/(1−β1ᵗ), and ε scaled by √(1−β2ᵗ).
  const T corr2 = std::sqrt(T(1) - b2p[0]);
  const T lr_t = lr[0] * corr2 / (T(1) - b1p[0]);
  const T eps_t = eps * corr2;
  for (int64_t i = 0, n = param->numel(); i < n; ++i) {
    const T a = b1 * m1[i] + (T(1) - b1) * g[i];
    const T b = b2 * m2[i] + (T(1) - b2) * g[i] * g[i];
    m1out[i] = a;
    m2out[i] = b;
    pout[i] = p[i] - lr_t * (a / (std::sqrt(b) + eps_t));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterOptimizerOps(OpRegistry* r) {
  r->Register("sgd").Input("Param").Input("Grad").Input("LearningRate").Output("ParamOut")
      .SetInferShape(SgdInferShape)
      .Kernel<float>(SgdKernel<float>).Kernel<double>(SgdKernel<double>);
  r->Register("momentum").Input("Param").Input("Grad").Input("Velocity").Input("LearningRate")
      .Output("ParamOut").Output("VelocityOut")
      .Attr("mu", 0.0f).Attr("use_nesterov", false)
      .SetInferShape(MomentumInferShape)
      .Kernel<float>(MomentumKernel<float>).Kernel<double>(MomentumKernel<double>);
  r->Register("adam").Input("Param").Input("Grad").Input("LearningRate")
      .Input("Moment1").Input("Moment2").Input("Beta1Pow").Input("Beta2Pow")
      .Output("ParamOut").Output("Moment1Out").Output("Moment2Out")
      .Attr("beta1", 0.9f).Attr("beta2", 0.999f).Attr("epsilon", 1e-8f).Attr("lazy_mode", false)
      .SetInferShape(AdamInferShape)
      .Kernel<float>(AdamKernel<float>).Kernel<double>(AdamKernel<double>);
}

}  // namespace oar
