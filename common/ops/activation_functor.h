// The functor framework of the elementwise activations with attributes
// (activation_attr_ops.cc, activation_more_ops.cc): a functor names the
// tensor its gradient reads (X or Out), reads its attributes once per call
// (Read), and gives the value (F) and the gradient (D) in double.
//
//   struct Softsign {
//     static constexpr Src kSrc = Src::kX;
//     static Params Read(const ExecutionContext&) { return {}; }
//     static double F(double x, const Params&) { return x / (1 + std::abs(x)); }
//     static double D(double x, double, double g, const Params&) { ... }
//   };
//   RegisterActivation<Softsign>(r, "softsign", {});
//
// The grad op declares both X and Out (dispensable), as Fluid's and
// Paddle's grad makers gave either over the releases, and reads its own.
//
// Thread-safety: stateless kernels.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"

namespace oar::activation {

// The attributes a functor reads, fetched once per kernel call.
struct Params {
  double a = 0, b = 0, c = 0;
  bool flag = false;
};

enum class Src { kX, kOut };

template <typename A, typename T>
absl::Status Forward(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, *x));
  const Params p = A::Read(ctx);
  const T* xp = x->data<T>();
  T* op = ctx.Output("Out")->mutable_data<T>();
  for (int64_t i = 0, n = x->numel(); i < n; ++i) op[i] = static_cast<T>(A::F(xp[i], p));
  return absl::OkStatus();
}

template <typename A, typename T>
absl::Status Backward(const ExecutionContext& ctx) {
  const char* src = A::kSrc == Src::kX ? "X" : "Out";
  OAR_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, src));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, src, 0, *s));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  if (g->numel() != s->numel()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), GradVarName("Out")),
                                                   g->dims().ToString(), " differs from ", InputLabel(ctx.op(), src),
                                                   s->dims().ToString()));
  }
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const Params p = A::Read(ctx);
  const T* sp = s->data<T>();
  const T* gp = g->data<T>();
  T* dp = dx->mutable_data<T>();
  for (int64_t i = 0, n = s->numel(); i < n; ++i) {
    dp[i] = static_cast<T>(A::kSrc == Src::kX ? A::D(sp[i], 0, gp[i], p) : A::D(0, sp[i], gp[i], p));
  }
  return absl::OkStatus();
}

inline absl::Status GradShape(InferShapeContext& ctx) {
  const char* src = ctx.HasInput("X") ? "X" : "Out";
  OAR_RETURN_IF_ERROR(ExpectLikeInput(ctx, GradVarName("Out"), src));
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim(src));
  return absl::OkStatus();
}

template <typename A>
OpInfo& RegisterActivation(OpRegistry* r, const std::string& type,
                           const std::vector<std::pair<std::string, float>>& attrs) {
  auto& fwd = r->Register(type)
                  .Input("X")
                  .Output("Out")
                  .SetInferShape(SameShapeAsX)
                  .Kernel<float>(Forward<A, float>)
                  .template Kernel<double>(Forward<A, double>);
  if (A::kSrc == Src::kX) {
    fwd.SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}));
  } else {
    fwd.SetGradMaker(GradOpMaker({}, {"Out"}, {"Out"}, {"X"}));
  }
  auto& grad = r->Register(type + "_grad")
                   .Input("X", kDispensable)
                   .Input("Out", kDispensable)
                   .Input(GradVarName("Out"))
                   .Output(GradVarName("X"), kDispensable)
                   .SetInferShape(GradShape)
                   .template Kernel<float>(Backward<A, float>)
                   .template Kernel<double>(Backward<A, double>);
  for (const auto& [name, value] : attrs) {
    fwd.Attr(name, value);
    grad.Attr(name, value);
  }
  return fwd;
}

// A piecewise-constant function (floor, ceil, round): its gradient is zero,
// and Paddle 2.x's grad op carries Out@GRAD alone (Fluid 1.x's X too).
inline absl::Status ZeroGradShape(InferShapeContext& ctx) {
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim(GradVarName("Out")));
  return absl::OkStatus();
}
template <typename T>
absl::Status ZeroGrad(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  T* dp = dx->mutable_data<T>();
  std::fill(dp, dp + g->numel(), T(0));
  return absl::OkStatus();
}
template <typename A>
void RegisterZeroGradActivation(OpRegistry* r, const std::string& type) {
  r->Register(type)
      .Input("X")
      .Output("Out")
      .SetInferShape(SameShapeAsX)
      .Kernel<float>(Forward<A, float>)
      .template Kernel<double>(Forward<A, double>)
      .SetGradMaker(GradOpMaker({}, {}, {"Out"}, {"X"}));
  r->Register(type + "_grad")
      .Input("X", kDispensable)
      .Input("Out", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .SetInferShape(ZeroGradShape)
      .Kernel<float>(ZeroGrad<float>)
      .template Kernel<double>(ZeroGrad<double>);
}

}  // namespace oar::activation
