// sgd, momentum (optionally Nesterov), adam and adamw, dense and sparse. Sparse
// sgd touches only the gradient's rows; sparse momentum updates every row
// with a zero gradient where it has none, as Fluid's kernels do; non-lazy
// sparse adam decays the moments of the rows without gradient and steps
// them with ε unscaled, as Paddle's CPU kernel does; lazy adam touches only
// the gradient's rows.
#include <cmath>
#include <functional>
#include <vector>

#include "common/base/cpu_clones.h"
#include "common/base/parallel_for.h"
#include "common/framework/op_registry.h"
#include "common/ops/ops.h"
#include "common/ops/optimizer_util.h"
#include "common/ops/sparse_table_update.h"

namespace oar {
namespace {

using namespace optimizer_util;  // NOLINT

absl::Status SgdInferShape(InferShapeContext& ctx) { return InferUpdateShape(ctx, {"Grad"}, {"ParamOut"}); }
absl::Status MomentumInferShape(InferShapeContext& ctx) {
  return InferUpdateShape(ctx, {"Grad", "Velocity"}, {"ParamOut", "VelocityOut"});
}
absl::Status AdamInferShape(InferShapeContext& ctx) {
  return InferUpdateShape(ctx, {"Grad", "Moment1", "Moment2"}, {"ParamOut", "Moment1Out", "Moment2Out"},
                          {"Beta1Pow", "Beta2Pow"});
}

// A dense update splits over RunEnv::intra_op (a sync pserver's pool) from
// twice this many elements: a large parameter's, at the step's barrier.
// Elementwise, so any split gives the same numbers.
constexpr int64_t kUpdateGrain = int64_t{1} << 16;

void ForUpdate(const ExecutionContext& ctx, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  ParallelFor(ctx.env() != nullptr ? ctx.env()->intra_op : nullptr, n, kUpdateGrain, fn);
}

template <typename T>
absl::Status SgdKernel(const ExecutionContext& ctx) {
  if (ParamIsTable(ctx)) return TableSgd(ctx);
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(const T* lr, In<T>(ctx, "LearningRate"));
  OAR_ASSIGN_OR_RETURN(GradView<T> g, ReadGrad<T>(ctx, *param, /*densify=*/false));
  const T* p = param->data<T>();
  T* out = Out<T>(ctx, "ParamOut", *param);
  const T rate = lr[0];
  if (!g.sparse()) {
    ForUpdate(ctx, param->numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = p[i] - rate * g.dense[i];
    });
    return absl::OkStatus();
  }
  if (out != p) std::copy(p, p + param->numel(), out);
  const T* v = g.rows.value.template data<T>();
  for (size_t r = 0; r < g.rows.rows.size(); ++r) {
    T* row = out + g.rows.rows[r] * g.width;
    for (int64_t k = 0; k < g.width; ++k) row[k] -= rate * v[r * g.width + k];
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status MomentumKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(GradView<T> g, ReadGrad<T>(ctx, *param, /*densify=*/true));
  OAR_ASSIGN_OR_RETURN(const T* v, In<T>(ctx, "Velocity"));
  OAR_ASSIGN_OR_RETURN(const T* lr, In<T>(ctx, "LearningRate"));
  const T mu = static_cast<T>(ctx.Attr<float>("mu"));
  const bool nesterov = ctx.Attr<bool>("use_nesterov");
  // Paddle 2.x: the gradient is rescaled, then (l2_decay) coeff·param added.
  const T rescale = static_cast<T>(ctx.Attr<float>("rescale_grad"));
  const T decay = ctx.Attr<std::string>("regularization_method") == "l2_decay"
                      ? static_cast<T>(ctx.Attr<float>("regularization_coeff"))
                      : T(0);
  const T* p = param->data<T>();
  T* pout = Out<T>(ctx, "ParamOut", *param);
  T* vout = Out<T>(ctx, "VelocityOut", *param);
  const T rate = lr[0];
  ForUpdate(ctx, param->numel(), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const T gi = g.dense[i] * rescale + decay * p[i];
      const T nv = mu * v[i] + gi;
      vout[i] = nv;
      pout[i] = nesterov ? p[i] - (gi + mu * nv) * rate : p[i] - rate * nv;
    }
  });
  return absl::OkStatus();
}

// The Adam update over n contiguous elements (the whole tensor, or one
// row of a sparse gradient), with clones for AVX2 and the baseline picked at load time (it is the
// optimizer step's hot loop). Outputs alias their inputs index for index at
// most (in-place update), so the loop carries no dependence.
template <typename T>
inline __attribute__((always_inline)) void AdamDenseBody(int64_t n, T b1, T b2, T lr_t, T eps_t, const T* g, const T* p,
                                                         const T* m1, const T* m2, T* pout, T* m1out, T* m2out) {
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC ivdep
#endif
  for (int64_t i = 0; i < n; ++i) {
    const T a = b1 * m1[i] + (T(1) - b1) * g[i];
    const T b = b2 * m2[i] + (T(1) - b2) * g[i] * g[i];
    m1out[i] = a;
    m2out[i] = b;
    pout[i] = p[i] - lr_t * (a / (std::sqrt(b) + eps_t));
  }
}

// Cloned for AVX2 (common/base/cpu_clones.h).
OAR_AVX2_CLONES void AdamDense(int64_t n, float b1, float b2, float lr_t, float eps_t, const float* g, const float* p,
                               const float* m1, const float* m2, float* pout, float* m1out, float* m2out) {
  AdamDenseBody(n, b1, b2, lr_t, eps_t, g, p, m1, m2, pout, m1out, m2out);
}
OAR_AVX2_CLONES void AdamDense(int64_t n, double b1, double b2, double lr_t, double eps_t, const double* g,
                               const double* p, const double* m1, const double* m2, double* pout, double* m1out,
                               double* m2out) {
  AdamDenseBody(n, b1, b2, lr_t, eps_t, g, p, m1, m2, pout, m1out, m2out);
}

// adam, and with kDecoupled Paddle 2.x's adamw: the parameter first decays
// by lr·lr_ratio·coeff (with_decay), then takes adam's step at lr·lr_ratio.
template <typename T, bool kDecoupled = false>
absl::Status AdamKernel(const ExecutionContext& ctx) {
  if (!kDecoupled && ParamIsTable(ctx)) return TableAdam(ctx);
  OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
  const bool lazy = ctx.Attr<bool>("lazy_mode");
  OAR_ASSIGN_OR_RETURN(GradView<T> g, ReadGrad<T>(ctx, *param, /*densify=*/kDecoupled && !lazy));
  OAR_ASSIGN_OR_RETURN(const T* lr_in, In<T>(ctx, "LearningRate"));
  T scaled_lr = lr_in[0];
  const T* lr = lr_in;
  OAR_ASSIGN_OR_RETURN(const T* m1, In<T>(ctx, "Moment1"));
  OAR_ASSIGN_OR_RETURN(const T* m2, In<T>(ctx, "Moment2"));
  OAR_ASSIGN_OR_RETURN(const T* b1p, In<T>(ctx, "Beta1Pow"));
  OAR_ASSIGN_OR_RETURN(const T* b2p, In<T>(ctx, "Beta2Pow"));
  const T b1 = static_cast<T>(ctx.Attr<float>("beta1"));
  const T b2 = static_cast<T>(ctx.Attr<float>("beta2"));
  const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  const T* p = param->data<T>();
  T* pout = Out<T>(ctx, "ParamOut", *param);
  T* m1out = Out<T>(ctx, "Moment1Out", *param);
  T* m2out = Out<T>(ctx, "Moment2Out", *param);
  if constexpr (kDecoupled) {
    scaled_lr = lr_in[0] * static_cast<T>(ctx.Attr<float>("lr_ratio"));
    lr = &scaled_lr;
    if (ctx.Attr<bool>("with_decay")) {
      const T keep = T(1) - scaled_lr * static_cast<T>(ctx.Attr<float>("coeff"));
      for (int64_t i = 0, n = param->numel(); i < n; ++i) pout[i] = p[i] * keep;
      p = pout;  // adam's step from the decayed parameter
    }
  }
  // Fluid's bias-corrected step: lr_t = lr·√(1−β2ᵗ)/(1−β1ᵗ), and ε scaled by √(1−β2ᵗ).
  const T beta1_pow = b1p[0], beta2_pow = b2p[0];
  // Paddle's CPU kernel for a sparse gradient advances the powers before its
  // step reads them: where Beta1PowOut is Beta1Pow (as every program binds
  // them), that step uses βᵗ⁺¹. Same numbers as Paddle, so the same here.
  const bool advanced = g.sparse() && ctx.InputVar("Beta1Pow") == ctx.OutputVar("Beta1PowOut") &&
                        ctx.InputVar("Beta2Pow") == ctx.OutputVar("Beta2PowOut");
  const T step_b1p = advanced ? beta1_pow * b1 : beta1_pow, step_b2p = advanced ? beta2_pow * b2 : beta2_pow;
  const T corr2 = std::sqrt(T(1) - step_b2p);
  const T lr_t = lr[0] * corr2 / (T(1) - step_b1p);
  const T eps_t = eps * corr2;
  // A sparse gradient without rows: no step at all, the powers kept (Paddle's kernel).
  const bool no_step = g.sparse() && g.rows.rows.empty();
  // Paddle 2.x's adam advances the powers itself (Fluid 1.x's programs use scale ops instead).
  if (Tensor* t = ctx.Output("Beta1PowOut")) t->mutable_data<T>(DDim{1})[0] = no_step ? beta1_pow : beta1_pow * b1;
  if (Tensor* t = ctx.Output("Beta2PowOut")) t->mutable_data<T>(DDim{1})[0] = no_step ? beta2_pow : beta2_pow * b2;
  if (!g.sparse()) {
    ForUpdate(ctx, param->numel(), [&](int64_t lo, int64_t hi) {
      AdamDense(hi - lo, b1, b2, lr_t, eps_t, g.dense + lo, p + lo, m1 + lo, m2 + lo, pout + lo, m1out + lo,
                m2out + lo);
    });
    return absl::OkStatus();
  }
  // Lazy: rows without gradient keep their parameter and moments.
  if (pout != p) std::copy(p, p + param->numel(), pout);
  if (m1out != m1) std::copy(m1, m1 + param->numel(), m1out);
  if (m2out != m2) std::copy(m2, m2 + param->numel(), m2out);
  const T* v = g.rows.value.template data<T>();
  if (!lazy && !g.rows.rows.empty()) {
    // Not lazy, as Paddle's CPU kernel: every row without gradient decays its
    // moments and steps by them with ε unscaled (m1 / (√m2 + ε)); the rows
    // with gradient take the dense step below. (No rows at all: no step.)
    std::vector<bool> has(static_cast<size_t>(param->dims()[0]), false);
    for (int64_t row : g.rows.rows) has[static_cast<size_t>(row)] = true;
    for (int64_t row = 0; row < param->dims()[0]; ++row) {
      if (has[static_cast<size_t>(row)]) continue;
      for (int64_t i = row * g.width, e = i + g.width; i < e; ++i) {
        m1out[i] *= b1;
        m2out[i] *= b2;
        pout[i] -= lr_t * (m1out[i] / (std::sqrt(m2out[i]) + eps));
      }
    }
  }
  for (size_t r = 0; r < g.rows.rows.size(); ++r) {
    const int64_t at = g.rows.rows[r] * g.width;  // rows are unique (ReadGrad merged them)
    AdamDense(g.width, b1, b2, lr_t, eps_t, v + r * g.width, pout + at, m1out + at, m2out + at, pout + at, m1out + at,
              m2out + at);
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterOptimizerOps(OpRegistry* r) {
  // The optional slots and attributes of Paddle 2.x's optimizers are declared
  // as its OpMakers declare them; what Oar does not implement (a master
  // fp32 copy, global beta powers, beta/epsilon tensors) must stay empty/off.
  r->Register("sgd")
      .Input("Param")
      .Input("Grad")
      .Input("LearningRate")
      .Output("ParamOut")
      .Input("MasterParam", kUnimplemented)
      .Output("MasterParamOut", kUnimplemented)
      .Attr("multi_precision", false)
      .Implements("multi_precision", {false})
      .SetInferShape(SgdInferShape)
      .Kernel<float>(SgdKernel<float>)
      .Kernel<double>(SgdKernel<double>);
  r->Register("momentum")
      .Input("Param")
      .Input("Grad")
      .Input("Velocity")
      .Input("LearningRate")
      .Output("ParamOut")
      .Output("VelocityOut")
      .Input("MasterParam", kUnimplemented)
      .Output("MasterParamOut", kUnimplemented)
      .Attr("mu", 0.0f)
      .Attr("use_nesterov", false)
      .Attr("regularization_method", std::string())
      .Attr("regularization_coeff", 0.0f)
      .Attr("rescale_grad", 1.0f)
      .Attr("multi_precision", false)
      .Implements("regularization_method", {std::string(), std::string("l2_decay")})
      .Implements("multi_precision", {false})
      .SetInferShape(MomentumInferShape)
      .Kernel<float>(MomentumKernel<float>)
      .Kernel<double>(MomentumKernel<double>);
  // adam and adamw share their slots and adam's attributes; adamw adds the
  // decoupled decay's and takes dense gradients (lazy_mode off), as
  // Paddle's CPU kernel.
  auto adam_like = [r](const std::string& type) -> OpInfo& {
    return r->Register(type)
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
        .Input("Beta1Tensor", kUnimplemented)
        .Input("Beta2Tensor", kUnimplemented)
        .Input("EpsilonTensor", kUnimplemented)
        .Input("MasterParam", kUnimplemented)
        .Input("SkipUpdate", kUnimplemented)
        .Output("MasterParamOut", kUnimplemented)
        .Attr("beta1", 0.9f)
        .Attr("beta2", 0.999f)
        .Attr("epsilon", 1e-8f)
        .Attr("lazy_mode", false)
        .Attr("use_global_beta_pow", false)
        .Attr("multi_precision", false)
        .Implements("use_global_beta_pow", {false})
        .Implements("multi_precision", {false})
        .SetInferShape(AdamInferShape);
  };
  adam_like("adam").Kernel<float>(AdamKernel<float>).Kernel<double>(AdamKernel<double>);
  adam_like("adamw")
      .Attr("coeff", 0.01f)
      .Attr("lr_ratio", 1.0f)
      .Attr("with_decay", false)
      .Implements("lazy_mode", {false})
      .Kernel<float>(AdamKernel<float, true>)
      .Kernel<double>(AdamKernel<double, true>);
  RegisterMoreOptimizerOps(r);
}

}  // namespace oar
