// elementwise_add/sub/mul/div/max/min/pow (and mod, floordiv: no gradient) with Fluid's `axis` broadcasting:
// Y's shape (trailing 1s dropped) must equal X's dimensions [axis, axis +
// rank(Y)); with axis = -1 Y aligns to X's trailing dimensions. X is viewed
// as [pre, n, post] and Y as [n]. Where that rule refuses the shapes and
// axis is -1, numpy's broadcast (numpy_broadcast.h), as Paddle 2.x does:
// either side may stretch, and each gradient sums over its side's stretch.
#include <cmath>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"

#include "common/framework/op_registry.h"
#include "common/ops/elementwise_layout.h"
#include "common/ops/numpy_broadcast.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// The result's shape where X and Y broadcast numpy's way and not Fluid's
// (axis -1 only); an unknown dimension (-1) takes the other side's.
absl::StatusOr<DDim> NumpyOutShape(const std::string& op, const DDim& x, const DDim& y) {
  DDim xk = x, yk = y;
  const int r = std::max(x.size(), y.size());
  for (int d = 0; d < r; ++d) {  // an unknown against a known size: that size
    const int xd = d - (r - x.size()), yd = d - (r - y.size());
    if (xd >= 0 && yd >= 0 && xk[xd] < 0 && yk[yd] >= 0) xk[xd] = yk[yd] == 1 ? -1 : yk[yd];
    if (xd >= 0 && yd >= 0 && yk[yd] < 0 && xk[xd] >= 0) yk[yd] = xk[xd] == 1 ? -1 : xk[xd];
  }
  for (DDim* dims : {&xk, &yk}) {
    for (int d = 0; d < dims->size(); ++d) {
      if ((*dims)[d] < 0) (*dims)[d] = 1;  // both unknown: 1 stretches to nothing, marked below
    }
  }
  OAR_ASSIGN_OR_RETURN(NumpyBcast b, NumpyBroadcast(op, xk, yk));
  DDim out = b.out;
  for (int d = 0; d < r; ++d) {
    const int xd = d - (r - x.size()), yd = d - (r - y.size());
    if ((xd >= 0 && x[xd] < 0 && (yd < 0 || y[yd] <= 1)) || (yd >= 0 && y[yd] < 0 && (xd < 0 || x[xd] <= 1))) {
      out[d] = -1;
    }
  }
  return out;
}

// Out: X's shape where Y fits inside X (Fluid's rule), else — axis -1, as
// Paddle 2.x writes every elementwise op — numpy's broadcast of both.
absl::StatusOr<DDim> ElementwiseOutShape(const InferShapeContext& ctx, const DDim& x, const DDim& y) {
  const int axis = ctx.Attr<int32_t>("axis");
  if (!ctx.IsRuntime() && (x.HasUnknown() || y.HasUnknown())) {
    if (y.size() <= x.size()) return x;  // checked when the sizes are known
    if (axis != -1) return ctx.Error("Y", y.ToString(), " has higher rank than X", x.ToString());
    return NumpyOutShape(ctx.op().type, x, y);
  }
  absl::StatusOr<Bcast> fluid = ElementwiseLayout(ctx.op().type, x, y, axis);
  if (fluid.ok() || axis != -1) return fluid.ok() ? absl::StatusOr<DDim>(x) : fluid.status();
  absl::StatusOr<NumpyBcast> numpy = NumpyBroadcast(ctx.op().type, x, y);
  if (!numpy.ok()) return fluid.status();
  return numpy->out;
}

absl::Status ElementwiseInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, ElementwiseOutShape(ctx, ctx.InputDim("X"), ctx.InputDim("Y")));
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  return absl::OkStatus();
}

// Fluid's layout for X and Y, or (axis -1) numpy's broadcast where Fluid's
// rule refuses them: exactly one of the two is set.
struct Layout {
  std::optional<Bcast> fluid;
  std::optional<NumpyBcast> numpy;
};
absl::StatusOr<Layout> LayoutOf(const ExecutionContext& ctx, const DDim& x, const DDim& y) {
  const int axis = ctx.Attr<int32_t>("axis");
  absl::StatusOr<Bcast> fluid = ElementwiseLayout(ctx.op().type, x, y, axis);
  if (fluid.ok()) return Layout{*fluid, std::nullopt};
  if (axis != -1) return fluid.status();
  absl::StatusOr<NumpyBcast> numpy = NumpyBroadcast(ctx.op().type, x, y);
  if (!numpy.ok()) return fluid.status();
  return Layout{std::nullopt, *numpy};
}

struct AddF {
  static constexpr bool kReadsX = false;
  template <typename T>
  static T F(T x, T y) {
    return x + y;
  }
  template <typename T>
  static T DX(T, T, T, T g) {
    return g;
  }
  template <typename T>
  static T DY(T, T, T, T g) {
    return g;
  }
};
struct SubF {
  static constexpr bool kReadsX = false;
  template <typename T>
  static T F(T x, T y) {
    return x - y;
  }
  template <typename T>
  static T DX(T, T, T, T g) {
    return g;
  }
  template <typename T>
  static T DY(T, T, T, T g) {
    return -g;
  }
};
struct MulF {
  static constexpr bool kReadsX = true;
  template <typename T>
  static T F(T x, T y) {
    return x * y;
  }
  template <typename T>
  static T DX(T, T y, T, T g) {
    return g * y;
  }
  template <typename T>
  static T DY(T x, T, T, T g) {
    return g * x;
  }
};
struct DivF {
  static constexpr bool kReadsX = false;
  template <typename T>
  static T F(T x, T y) {
    return x / y;
  }
  template <typename T>
  static T DX(T, T y, T, T g) {
    return g / y;
  }
  template <typename T>
  static T DY(T, T y, T out, T g) {
    return -g * out / y;
  }
};

struct MaxF {
  static constexpr bool kReadsX = true;
  template <typename T>
  static T F(T x, T y) {
    return x > y ? x : y;
  }
  template <typename T>
  static T DX(T x, T y, T, T g) {
    return x > y ? g : T(0);
  }
  template <typename T>
  static T DY(T x, T y, T, T g) {
    return x > y ? T(0) : g;
  }
};
struct MinF {
  static constexpr bool kReadsX = true;
  template <typename T>
  static T F(T x, T y) {
    return x < y ? x : y;
  }
  template <typename T>
  static T DX(T x, T y, T, T g) {
    return x < y ? g : T(0);
  }
  template <typename T>
  static T DY(T x, T y, T, T g) {
    return x < y ? T(0) : g;
  }
};
struct PowF {
  static constexpr bool kReadsX = true;
  template <typename T>
  static T F(T x, T y) {
    return std::pow(x, y);
  }
  template <typename T>
  static T DX(T x, T y, T, T g) {
    return g * y * std::pow(x, y - T(1));
  }
  // From X and Y alone: Fluid's elementwise_pow_grad has no Out input.
  template <typename T>
  static T DY(T x, T y, T, T g) {
    return g * std::pow(x, y) * std::log(x);
  }
};

// No gradient (as in Fluid and Paddle). Integer division by zero is
// refused by the kernel below, not left to the hardware.
struct ModF {  // Python's %: the sign of the divisor
  template <typename T>
  static T F(T x, T y) {
    if constexpr (std::is_integral_v<T>) {
      T r = x % y;
      return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
    } else {
      T r = std::fmod(x, y);
      return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
    }
  }
};
struct FloorDivF {  // Fluid's and Paddle 2.6's: the quotient truncated toward zero
  template <typename T>
  static T F(T x, T y) {
    if constexpr (std::is_integral_v<T>)
      return x / y;
    else
      return std::trunc(x / y);
  }
};

template <typename F, typename T>
absl::Status ForwardKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, *x));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Y", 0, *y));
  OAR_ASSIGN_OR_RETURN(Layout layout, LayoutOf(ctx, x->dims(), y->dims()));
  const T* xp = x->data<T>();
  const T* yp = y->data<T>();
  if (layout.numpy) {
    T* op = ctx.Output("Out")->mutable_data<T>(layout.numpy->out);
    layout.numpy->ForEach([&](int64_t o, int64_t xi, int64_t yi) { op[o] = F::F(xp[xi], yp[yi]); });
    return absl::OkStatus();
  }
  T* op = ctx.Output("Out")->mutable_data<T>();
  ForEachBroadcast(*layout.fluid, [&](int64_t e, int64_t j) { op[e] = F::F(xp[e], yp[j]); });
  return absl::OkStatus();
}

template <typename F, typename T>
absl::Status IntegerForwardKernel(const ExecutionContext& ctx) {
  if constexpr (std::is_integral_v<T>) {
    OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
    for (int64_t i = 0; i < y->numel(); ++i) {
      if (y->data<T>()[i] == 0) {
        return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), "Y"), " holds 0 at ",
                                                       i, "; integers cannot be divided by it"));
      }
    }
  }
  return ForwardKernel<F, T>(ctx);
}

// Out (when given) and Out@GRAD have X's shape. Without X (Fluid 1.3-1.6's
// add, sub and div grads are not given it), X's shape is Out@GRAD's.
absl::Status ElementwiseGradInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.HasInput("X") ? ctx.InputDim("X") : ctx.InputDim(GradVarName("Out"));
  OAR_ASSIGN_OR_RETURN(const DDim out, ElementwiseOutShape(ctx, x, ctx.InputDim("Y")));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Out"), out));
  if (ctx.HasInput("Out")) OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, "Out", out));
  ctx.SetOutputDim(GradVarName("X"), x);
  ctx.SetOutputDim(GradVarName("Y"), ctx.InputDim("Y"));
  ctx.ShareLoD("X", GradVarName("X"));  // as Fluid: a LoD op's gradient finds its sequences
  ctx.ShareLoD("Y", GradVarName("Y"));
  return absl::OkStatus();
}

template <typename F, typename T>
absl::Status GradKernel(const ExecutionContext& ctx) {
  // X is not given to Fluid 1.3-1.6's add, sub and div grads, which do not
  // read it (its shape is Out@GRAD's); the others need its values.
  const Tensor* x = ctx.InputSize("X") > 0 ? ctx.Input("X") : nullptr;
  if (x == nullptr && F::kReadsX) OAR_RETURN_IF_ERROR(RequireInput(ctx, "X").status());
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dout, RequireInput(ctx, GradVarName("Out")));
  const Tensor* out = ctx.Input("Out");  // div's dY needs it
  if (std::is_same_v<F, DivF> && ctx.Output(GradVarName("Y")) != nullptr) {
    OAR_ASSIGN_OR_RETURN(out, RequireInput(ctx, "Out"));
  }
  if (x != nullptr) OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, *x));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Y", 0, *y));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *dout));
  if (out != nullptr && out->initialized()) OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Out", 0, *out));
  const DDim xdims = x != nullptr ? x->dims() : dout->dims();
  OAR_ASSIGN_OR_RETURN(Layout layout, LayoutOf(ctx, xdims, y->dims()));
  const DDim out_dims = layout.numpy ? layout.numpy->out : xdims;
  if (dout->numel() != out_dims.numel()) {  // ([] and [1] are one scalar)
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), GradVarName("Out")),
                                                   " has shape ", dout->dims().ToString(), ", the result ",
                                                   out_dims.ToString()));
  }
  const T* xp = x != nullptr ? x->data<T>() : nullptr;
  const T* yp = y->data<T>();
  const T* gp = dout->data<T>();
  const T* outp = out ? out->data<T>() : nullptr;
  auto o = [outp](int64_t e) { return outp ? outp[e] : T(0); };
  auto xv = [xp](int64_t e) { return xp ? xp[e] : T(0); };  // read only where F::kReadsX
  if (layout.numpy) {                                       // sums over each side's stretched dimensions, in double
    Tensor* dx = ctx.Output(GradVarName("X"));
    Tensor* dy = ctx.Output(GradVarName("Y"));
    std::vector<double> sx(dx ? static_cast<size_t>(xdims.numel()) : 0), sy(dy ? static_cast<size_t>(y->numel()) : 0);
    layout.numpy->ForEach([&](int64_t e, int64_t xi, int64_t yi) {
      if (dx) sx[static_cast<size_t>(xi)] += F::DX(xv(xi), yp[yi], o(e), gp[e]);
      if (dy) sy[static_cast<size_t>(yi)] += F::DY(xv(xi), yp[yi], o(e), gp[e]);
    });
    if (dx) {
      T* d = dx->mutable_data<T>(xdims);
      for (size_t i = 0; i < sx.size(); ++i) d[i] = static_cast<T>(sx[i]);
    }
    if (dy) {
      T* d = dy->mutable_data<T>(y->dims());
      for (size_t i = 0; i < sy.size(); ++i) d[i] = static_cast<T>(sy[i]);
    }
    return absl::OkStatus();
  }
  const Bcast& b = *layout.fluid;
  if (Tensor* dx = ctx.Output(GradVarName("X"))) {
    T* d = dx->mutable_data<T>();
    ForEachBroadcast(b, [&](int64_t e, int64_t j) { d[e] = F::DX(xv(e), yp[j], o(e), gp[e]); });
  }
  if (Tensor* dy = ctx.Output(GradVarName("Y"))) {
    T* d = dy->mutable_data<T>();
    if (b.same) {
      ForEachBroadcast(b, [&](int64_t e, int64_t j) { d[e] = F::DY(xv(e), yp[j], o(e), gp[e]); });
    } else {  // reduce over the broadcast dimensions
      std::fill(d, d + b.n, T(0));
      ForEachBroadcast(b, [&](int64_t e, int64_t j) { d[j] += F::DY(xv(e), yp[j], o(e), gp[e]); });
    }
  }
  return absl::OkStatus();
}

template <typename F>
void RegisterBinary(OpRegistry* r, const std::string& type, bool grad_needs_out) {
  std::vector<std::string> fwd_outs;
  if (grad_needs_out) fwd_outs.push_back("Out");
  r->Register(type)
      .Input("X")
      .Input("Y")
      .Output("Out")
      .Attr("axis", int32_t{-1})
      .SetInferShape(ElementwiseInferShape)
      .SetGradMaker(GradOpMaker({"X", "Y"}, fwd_outs, {"Out"}, {"X", "Y"}))
      .Kernel<float>(ForwardKernel<F, float>)
      .template Kernel<double>(ForwardKernel<F, double>);
  r->Register(type + "_grad")
      .Input("X", kDispensable)
      .Input("Y")
      .Input("Out", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .Attr("axis", int32_t{-1})
      .SetInferShape(ElementwiseGradInferShape)
      .Kernel<float>(GradKernel<F, float>)
      .template Kernel<double>(GradKernel<F, double>);
  // X@GRAD on Out@GRAD: add's and sub's dX is dOut itself (Fluid's in-place
  // pair); the others write dX before dY reads dOut.
  if (type != "elementwise_add" && type != "elementwise_sub") r->Extend(type + "_grad").NotInPlace();
}

}  // namespace

void RegisterElementwiseOps(OpRegistry* r) {
  RegisterBinary<AddF>(r, "elementwise_add", false);
  RegisterBinary<SubF>(r, "elementwise_sub", false);
  RegisterBinary<MulF>(r, "elementwise_mul", false);
  RegisterBinary<DivF>(r, "elementwise_div", true);
  RegisterBinary<MaxF>(r, "elementwise_max", false);
  RegisterBinary<MinF>(r, "elementwise_min", false);
  RegisterBinary<PowF>(r, "elementwise_pow", false);
  auto x_dtype = +[](const ExecutionContext& c) { return InputDtypeOf(c, "X"); };
  NumericCpuKernels(r->Register("elementwise_mod")
                        .Input("X")
                        .Input("Y")
                        .Output("Out")
                        .Attr("axis", int32_t{-1})
                        .SetInferShape(ElementwiseInferShape)
                        .SetKernelDtype(x_dtype),
                    IntegerForwardKernel<ModF, float>, IntegerForwardKernel<ModF, double>,
                    IntegerForwardKernel<ModF, int32_t>, IntegerForwardKernel<ModF, int64_t>);
  NumericCpuKernels(r->Register("elementwise_floordiv")
                        .Input("X")
                        .Input("Y")
                        .Output("Out")
                        .Attr("axis", int32_t{-1})
                        .SetInferShape(ElementwiseInferShape)
                        .SetKernelDtype(x_dtype),
                    IntegerForwardKernel<FloorDivF, float>, IntegerForwardKernel<FloorDivF, double>,
                    IntegerForwardKernel<FloorDivF, int32_t>, IntegerForwardKernel<FloorDivF, int64_t>);
}

}  // namespace oar
