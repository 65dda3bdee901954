// Unary activations and math: relu, sigmoid, tanh, exp and sqrt compute
// their gradient from Out (as Fluid does); square, cos, abs and sign from X.
#include <cmath>

#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

struct Relu {
  template <typename T>
  static T F(T x) {
    return x > T(0) ? x : T(0);
  }
  template <typename T>
  static T D(T /*x*/, T out, T g) {
    return out > T(0) ? g : T(0);
  }
};
struct Sigmoid {
  template <typename T>
  static T F(T x) {
    return T(1) / (T(1) + std::exp(-x));
  }
  template <typename T>
  static T D(T, T out, T g) {
    return g * out * (T(1) - out);
  }
};
struct Tanh {
  template <typename T>
  static T F(T x) {
    return std::tanh(x);
  }
  template <typename T>
  static T D(T, T out, T g) {
    return g * (T(1) - out * out);
  }
};
struct Exp {
  template <typename T>
  static T F(T x) {
    return std::exp(x);
  }
  template <typename T>
  static T D(T, T out, T g) {
    return g * out;
  }
};
struct Sqrt {
  template <typename T>
  static T F(T x) {
    return std::sqrt(x);
  }
  template <typename T>
  static T D(T, T out, T g) {
    return g * T(0.5) / out;
  }
};
struct Cos {
  template <typename T>
  static T F(T x) {
    return std::cos(x);
  }
  template <typename T>
  static T D(T x, T, T g) {
    return -g * std::sin(x);
  }
};
struct Abs {
  template <typename T>
  static T F(T x) {
    return std::abs(x);
  }
  template <typename T>
  static T D(T x, T, T g) {
    return x > T(0) ? g : (x < T(0) ? -g : T(0));
  }
};
// Zero gradient almost everywhere (floor, ceil and round, whose grad ops
// carry no X, are in activation_more_ops.cc).
struct Sign {
  template <typename T>
  static T F(T x) {
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
  }
  template <typename T>
  static T D(T, T, T) {
    return T(0);
  }
};
struct Square {
  template <typename T>
  static T F(T x) {
    return x * x;
  }
  template <typename T>
  static T D(T x, T, T g) {
    return g * T(2) * x;
  }
};

template <typename A, typename T>
absl::Status Forward(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const T* xp = x->data<T>();
  T* op = ctx.Output("Out")->mutable_data<T>();
  for (int64_t i = 0, n = x->numel(); i < n; ++i) op[i] = A::F(xp[i]);
  return absl::OkStatus();
}

// Grad ops carry either X (uses_x) or Out; the shape comes from whichever.
template <typename A, typename T, bool kUsesX>
absl::Status Backward(const ExecutionContext& ctx) {
  const char* src = kUsesX ? "X" : "Out";
  OAR_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, src));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, src, 0, *s));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const T* sp = s->data<T>();
  const T* gp = g->data<T>();
  T* dp = dx->mutable_data<T>();
  for (int64_t i = 0, n = s->numel(); i < n; ++i) {
    dp[i] = kUsesX ? A::D(sp[i], T(0), gp[i]) : A::D(T(0), sp[i], gp[i]);
  }
  return absl::OkStatus();
}

// X@GRAD takes the shape of the grad op's X (or Out); Out@GRAD must match it.
template <bool kUsesX>
absl::Status UnaryGradInferShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(ExpectLikeInput(ctx, GradVarName("Out"), kUsesX ? "X" : "Out"));
  if (kUsesX) return GradSameShapeAsX(ctx);
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim("Out"));
  return absl::OkStatus();
}

template <typename A, bool kUsesX>
void RegisterUnary(OpRegistry* r, const std::string& type) {
  const char* src = kUsesX ? "X" : "Out";
  auto& fwd = r->Register(type)
                  .Input("X")
                  .Output("Out")
                  .SetInferShape(SameShapeAsX)
                  .Kernel<float>(Forward<A, float>)
                  .template Kernel<double>(Forward<A, double>);
  if (kUsesX) {
    fwd.SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}));
  } else {
    fwd.SetGradMaker(GradOpMaker({}, {"Out"}, {"Out"}, {"X"}));
  }
  // The other of X and Out is declared too: Fluid 1.0-1.4 gave square's and
  // log's grads Out as well, 1.0-1.6 abs's, and 1.6-2.3 with MKLDNN on the
  // Out-based ones X. Only `src` is read.
  r->Register(type + "_grad")
      .Input(src)
      .Input(kUsesX ? "Out" : "X", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .SetInferShape(UnaryGradInferShape<kUsesX>)
      .template Kernel<float>(Backward<A, float, kUsesX>)
      .template Kernel<double>(Backward<A, double, kUsesX>);
}

}  // namespace

void RegisterActivationOps(OpRegistry* r) {
  RegisterUnary<Relu, false>(r, "relu");
  RegisterUnary<Sigmoid, false>(r, "sigmoid");
  RegisterUnary<Tanh, false>(r, "tanh");
  RegisterUnary<Square, true>(r, "square");
  RegisterUnary<Exp, false>(r, "exp");
  RegisterUnary<Sqrt, false>(r, "sqrt");
  RegisterUnary<Cos, true>(r, "cos");
  RegisterUnary<Abs, true>(r, "abs");
  RegisterUnary<Sign, true>(r, "sign");
}

}  // namespace oar
