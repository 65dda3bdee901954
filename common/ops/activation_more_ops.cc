// The rest of Fluid's and Paddle's elementwise activations and unary maths:
// the shrinks (softshrink, hard_shrink, tanh_shrink), thresholded_relu,
// brelu, soft_relu, selu, stanh, softsign, logsigmoid; the trigonometric,
// hyperbolic and error functions; log2/log10/log1p; and floor, ceil and
// round with their zero gradients. Attribute names and defaults are
// Paddle's; each gradient reads X or Out as Paddle's grad maker gives it.
//
// Thread-safety: stateless kernels.
#include <cmath>

#include "common/ops/activation_functor.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

using activation::Params;
using activation::RegisterActivation;
using activation::RegisterZeroGradActivation;
using activation::Src;

// A functor of X alone, no attributes: F(x) and dF/dx.
#define OAR_PLAIN_X(Name, f, d)                                                    \
  struct Name {                                                                    \
    static constexpr Src kSrc = Src::kX;                                           \
    static Params Read(const ExecutionContext&) { return {}; }                     \
    static double F(double x, const Params&) { return f; }                         \
    static double D(double x, double, double g, const Params&) { return g * (d); } \
  };

OAR_PLAIN_X(Sin, std::sin(x), std::cos(x))
OAR_PLAIN_X(Tan, std::tan(x), 1 / (std::cos(x) * std::cos(x)))
OAR_PLAIN_X(Sinh, std::sinh(x), std::cosh(x))
OAR_PLAIN_X(Cosh, std::cosh(x), std::sinh(x))
OAR_PLAIN_X(Asin, std::asin(x), 1 / std::sqrt(1 - x * x))
OAR_PLAIN_X(Acos, std::acos(x), -1 / std::sqrt(1 - x * x))
OAR_PLAIN_X(Atan, std::atan(x), 1 / (1 + x * x))
OAR_PLAIN_X(Erf, std::erf(x), M_2_SQRTPI* std::exp(-x* x))
OAR_PLAIN_X(Log2, std::log2(x), 1 / (x * M_LN2))
OAR_PLAIN_X(Log10, std::log10(x), 1 / (x * M_LN10))
OAR_PLAIN_X(Log1p, std::log1p(x), 1 / (1 + x))
OAR_PLAIN_X(Softsign, x / (1 + std::abs(x)), 1 / ((1 + std::abs(x)) * (1 + std::abs(x))))
OAR_PLAIN_X(TanhShrink, x - std::tanh(x), std::tanh(x) * std::tanh(x))
OAR_PLAIN_X(LogSigmoid, -std::log1p(std::exp(-x)), 1 / (1 + std::exp(x)))
#undef OAR_PLAIN_X

struct Floor {
  static double F(double x, const Params&) { return std::floor(x); }
  static Params Read(const ExecutionContext&) { return {}; }
};
struct Ceil {
  static double F(double x, const Params&) { return std::ceil(x); }
  static Params Read(const ExecutionContext&) { return {}; }
};
struct Round {  // halves away from zero, as std::round and Paddle
  static double F(double x, const Params&) { return std::round(x); }
  static Params Read(const ExecutionContext&) { return {}; }
};

struct SoftShrink {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext& ctx) { return {.a = ctx.Attr<float>("lambda")}; }
  static double F(double x, const Params& p) { return x > p.a ? x - p.a : (x < -p.a ? x + p.a : 0); }
  static double D(double x, double, double g, const Params& p) { return x > p.a || x < -p.a ? g : 0; }
};
struct HardShrink {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext& ctx) { return {.a = ctx.Attr<float>("threshold")}; }
  static double F(double x, const Params& p) { return x > p.a || x < -p.a ? x : 0; }
  static double D(double x, double, double g, const Params& p) { return x > p.a || x < -p.a ? g : 0; }
};
struct ThresholdedRelu {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext& ctx) { return {.a = ctx.Attr<float>("threshold")}; }
  static double F(double x, const Params& p) { return x > p.a ? x : 0; }
  static double D(double x, double, double g, const Params& p) { return x > p.a ? g : 0; }
};
struct BRelu {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext& ctx) {
    return {.a = ctx.Attr<float>("t_min"), .b = ctx.Attr<float>("t_max")};
  }
  static double F(double x, const Params& p) { return std::min(std::max(x, p.a), p.b); }
  static double D(double x, double, double g, const Params& p) { return x > p.a && x < p.b ? g : 0; }
};
// log(1 + e^clip(x, ±threshold)); the gradient from Out, as Paddle's.
struct SoftRelu {
  static constexpr Src kSrc = Src::kOut;
  static Params Read(const ExecutionContext& ctx) { return {.a = ctx.Attr<float>("threshold")}; }
  static double F(double x, const Params& p) { return std::log1p(std::exp(std::min(std::max(x, -p.a), p.a))); }
  static double D(double, double out, double g, const Params& p) {
    return out > -p.a && out < p.a ? g * (1 - std::exp(-out)) : 0;
  }
};
struct Selu {
  static constexpr Src kSrc = Src::kOut;
  static Params Read(const ExecutionContext& ctx) {
    return {.a = ctx.Attr<float>("scale"), .b = ctx.Attr<float>("alpha")};
  }
  static double F(double x, const Params& p) { return x > 0 ? p.a * x : p.a * p.b * (std::exp(x) - 1); }
  static double D(double, double out, double g, const Params& p) { return out > 0 ? g * p.a : g * (out + p.a * p.b); }
};
struct STanh {
  static constexpr Src kSrc = Src::kX;
  static Params Read(const ExecutionContext& ctx) {
    return {.a = ctx.Attr<float>("scale_a"), .b = ctx.Attr<float>("scale_b")};
  }
  static double F(double x, const Params& p) { return p.b * std::tanh(p.a * x); }
  static double D(double x, double, double g, const Params& p) {
    const double t = std::tanh(p.a * x);
    return g * p.a * p.b * (1 - t * t);
  }
};

}  // namespace

void RegisterActivationMoreOps(OpRegistry* r) {
  RegisterActivation<Sin>(r, "sin", {});
  RegisterActivation<Tan>(r, "tan", {});
  RegisterActivation<Sinh>(r, "sinh", {});
  RegisterActivation<Cosh>(r, "cosh", {});
  RegisterActivation<Asin>(r, "asin", {});
  RegisterActivation<Acos>(r, "acos", {});
  RegisterActivation<Atan>(r, "atan", {});
  RegisterActivation<Erf>(r, "erf", {});
  RegisterActivation<Log2>(r, "log2", {});
  RegisterActivation<Log10>(r, "log10", {});
  RegisterActivation<Log1p>(r, "log1p", {});
  RegisterActivation<Softsign>(r, "softsign", {});
  RegisterActivation<TanhShrink>(r, "tanh_shrink", {});
  RegisterActivation<LogSigmoid>(r, "logsigmoid", {});
  RegisterActivation<SoftShrink>(r, "softshrink", {{"lambda", 0.5f}});
  RegisterActivation<HardShrink>(r, "hard_shrink", {{"threshold", 0.5f}});
  RegisterActivation<ThresholdedRelu>(r, "thresholded_relu", {{"threshold", 1.0f}});
  RegisterActivation<BRelu>(r, "brelu", {{"t_min", 0.0f}, {"t_max", 24.0f}});
  RegisterActivation<SoftRelu>(r, "soft_relu", {{"threshold", 40.0f}});
  RegisterActivation<Selu>(
      r, "selu", {{"scale", 1.0507009873554804934193349852946f}, {"alpha", 1.6732632423543772848170429916717f}});
  RegisterActivation<STanh>(r, "stanh", {{"scale_a", 0.67f}, {"scale_b", 1.7159f}});
  RegisterZeroGradActivation<Floor>(r, "floor");
  RegisterZeroGradActivation<Ceil>(r, "ceil");
  RegisterZeroGradActivation<Round>(r, "round");
}

}  // namespace oar
