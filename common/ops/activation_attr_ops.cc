// Activations with attributes, as Paddle 2.x writes them: gelu (exact or
// tanh-approximate), leaky_relu, elu, relu6, softplus, silu, swish,
// hard_swish, hard_sigmoid, and the unary maths log, rsqrt, reciprocal and
// pow (a float exponent). Each grad op reads X or Out as Paddle's grad
// maker gives it (both are declared; the kernel needs its own one) and
// Out@GRAD.
//
// Thread-safety: stateless kernels.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/activation_functor.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

using activation::Params;
using activation::RegisterActivation;
using activation::Src;

struct Gelu {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext& ctx) { return {.flag = ctx.Attr<bool>("approximate")}; }
  static double F(double x, const Params& p) {
    if (p.flag) return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + std::erf(x * M_SQRT1_2));
  }
  static double D(double x, double, double g, const Params& p) {
    if (p.flag) {
      const double k = std::sqrt(2 / M_PI), u = k * (x + 0.044715 * x * x * x), t = std::tanh(u);
      return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x));
    }
    return g * (0.5 * (1 + std::erf(x * M_SQRT1_2)) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI));
  }
};
struct LeakyRelu {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext& ctx) { return {.a = ctx.Attr<float>("alpha")}; }
  static double F(double x, const Params& p) { return x > 0 ? x : p.a * x; }
  static double D(double x, double, double g, const Params& p) { return x > 0 ? g : p.a * g; }
};
struct Elu {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext& ctx) { return {.a = ctx.Attr<float>("alpha")}; }
  static double F(double x, const Params& p) { return x > 0 ? x : p.a * (std::exp(x) - 1); }
  static double D(double x, double, double g, const Params& p) { return x > 0 ? g : g * p.a * std::exp(x); }
};
struct Relu6 {
  static constexpr Src kSrc = Src::kOut;
  static Params Read(const ExecutionContext& ctx) { return {.a = ctx.Attr<float>("threshold")}; }
  static double F(double x, const Params& p) { return std::min(std::max(x, 0.0), p.a); }
  static double D(double, double out, double g, const Params& p) { return out > 0 && out < p.a ? g : 0; }
};
struct Softplus {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext& ctx) {
    return {.a = ctx.Attr<float>("beta"), .b = ctx.Attr<float>("threshold")};
  }
  static double F(double x, const Params& p) { return x * p.a > p.b ? x : std::log1p(std::exp(p.a * x)) / p.a; }
  static double D(double x, double, double g, const Params& p) {
    return x * p.a > p.b ? g : g / (1 + std::exp(-p.a * x));
  }
};
struct Silu {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext&) { return {}; }
  static double F(double x, const Params&) { return x / (1 + std::exp(-x)); }
  static double D(double x, double, double g, const Params&) {
    const double s = 1 / (1 + std::exp(-x));
    return g * s * (1 + x * (1 - s));
  }
};
struct Swish {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext& ctx) { return {.a = ctx.Attr<float>("beta")}; }
  static double F(double x, const Params& p) { return x / (1 + std::exp(-p.a * x)); }
  static double D(double x, double, double g, const Params& p) {
    const double s = 1 / (1 + std::exp(-p.a * x));
    return g * (s + p.a * x * s * (1 - s));
  }
};
struct HardSwish {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext& ctx) {
    return {.a = ctx.Attr<float>("threshold"), .b = ctx.Attr<float>("scale"), .c = ctx.Attr<float>("offset")};
  }
  static double F(double x, const Params& p) { return x * std::min(std::max(x + p.c, 0.0), p.a) / p.b; }
  static double D(double x, double, double g, const Params& p) {
    if (x + p.c <= 0) return 0;
    if (x + p.c >= p.a) return g * p.a / p.b;
    return g * (2 * x + p.c) / p.b;
  }
};
struct HardSigmoid {
  static constexpr Src kSrc = Src::kOut;
  static Params Read(const ExecutionContext& ctx) {
    return {.a = ctx.Attr<float>("slope"), .b = ctx.Attr<float>("offset")};
  }
  static double F(double x, const Params& p) { return std::min(std::max(p.a * x + p.b, 0.0), 1.0); }
  static double D(double, double out, double g, const Params& p) { return out > 0 && out < 1 ? g * p.a : 0; }
};
struct Log {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext&) { return {}; }
  static double F(double x, const Params&) { return std::log(x); }
  static double D(double x, double, double g, const Params&) { return g / x; }
};
struct Rsqrt {
  static constexpr Src kSrc = Src::kOut;
  static Params Read(const ExecutionContext&) { return {}; }
  static double F(double x, const Params&) { return 1 / std::sqrt(x); }
  static double D(double, double out, double g, const Params&) { return -0.5 * g * out * out * out; }
};
struct Reciprocal {
  static constexpr Src kSrc = Src::kOut;
  static Params Read(const ExecutionContext&) { return {}; }
  static double F(double x, const Params&) { return 1 / x; }
  static double D(double, double out, double g, const Params&) { return -g * out * out; }
};
struct Pow {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext& ctx) { return {.a = ctx.Attr<float>("factor")}; }
  static double F(double x, const Params& p) { return std::pow(x, p.a); }
  static double D(double x, double, double g, const Params& p) { return g * p.a * std::pow(x, p.a - 1); }
};

}  // namespace

void RegisterActivationAttrOps(OpRegistry* r) {
  RegisterActivation<Gelu>(r, "gelu", {});
  r->Extend("gelu").Attr("approximate", false).Attr("use_mkldnn", false).Attr("use_cudnn", false);
  r->Extend("gelu_grad").Attr("approximate", false).Attr("use_mkldnn", false).Attr("use_cudnn", false);
  RegisterActivation<LeakyRelu>(r, "leaky_relu", {{"alpha", 0.02f}});
  RegisterActivation<Elu>(r, "elu", {{"alpha", 1.0f}});
  RegisterActivation<Relu6>(r, "relu6", {{"threshold", 6.0f}});
  RegisterActivation<Softplus>(r, "softplus", {{"beta", 1.0f}, {"threshold", 20.0f}});
  RegisterActivation<Silu>(r, "silu", {});
  RegisterActivation<Swish>(r, "swish", {{"beta", 1.0f}});
  RegisterActivation<HardSwish>(r, "hard_swish", {{"threshold", 6.0f}, {"scale", 6.0f}, {"offset", 3.0f}});
  RegisterActivation<HardSigmoid>(r, "hard_sigmoid", {{"slope", 0.2f}, {"offset", 0.5f}});
  RegisterActivation<Log>(r, "log", {});
  RegisterActivation<Rsqrt>(r, "rsqrt", {});
  RegisterActivation<Reciprocal>(r, "reciprocal", {});
  RegisterActivation<Pow>(r, "pow", {{"factor", 1.0f}});
}

}  // namespace oar
