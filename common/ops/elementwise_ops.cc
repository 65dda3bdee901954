// elementwise_add/sub/mul/div with Fluid's `axis` broadcasting: Y's shape
// (trailing 1s dropped) must equal X's dimensions [axis, axis + rank(Y)); with
// axis = -1 Y aligns to X's trailing dimensions. X is viewed as [pre, n, post]
// and Y as [n].
#include <cmath>

#include "common/op_registry.h"
#include "common/ops/elementwise_layout.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

absl::Status ElementwiseInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X"), y = ctx.InputDim("Y");
  if (ctx.IsRuntime() || (!x.HasUnknown() && !y.HasUnknown())) {
    OAR_RETURN_IF_ERROR(ElementwiseLayout(ctx.op().type, x, y, ctx.Attr<int32_t>("axis")).status());
  } else if (y.size() > x.size()) {
    return ctx.Error("Y", y.ToString(), " has higher rank than X", x.ToString());
  }
  return SameShapeAsX(ctx);
}

struct AddF {
  template <typename T> static T F(T x, T y) { return x + y; }
  template <typename T> static T DX(T, T, T, T g) { return g; }
  template <typename T> static T DY(T, T, T, T g) { return g; }
};
struct SubF {
  template <typename T> static T F(T x, T y) { return x - y; }
  template <typename T> static T DX(T, T, T, T g) { return g; }
  template <typename T> static T DY(T, T, T, T g) { return -g; }
};
struct MulF {
  template <typename T> static T F(T x, T y) { return x * y; }
  template <typename T> static T DX(T, T y, T, T g) { return g * y; }
  template <typename T> static T DY(T x, T, T, T g) { return g * x; }
};
struct DivF {
  template <typename T> static T F(T x, T y) { return x / y; }
  template <typename T> static T DX(T, T y, T, T g) { return g / y; }
  template <typename T> static T DY(T, T y, T out, T g) { return -g * out / y; }
};

struct MaxF {
  template <typename T> static T F(T x, T y) { return x > y ? x : y; }
  template <typename T> static T DX(T x, T y, T, T g) { return x > y ? g : T(0); }
  template <typename T> static T DY(T x, T y, T, T g) { return x > y ? T(0) : g; }
};
struct MinF {
  template <typename T> static T F(T x, T y) { return x < y ? x : y; }
  template <typename T> static T DX(T x, T y, T, T g) { return x < y ? g : T(0); }
  template <typename T> static T DY(T x, T y, T, T g) { return x < y ? T(0) : g; }
};
struct PowF {
  template <typename T> static T F(T x, T y) { return std::pow(x, y); }
  template <typename T> static T DX(T x, T y, T, T g) { return g * y * std::pow(x, y - T(1)); }
  // From X and Y alone: Fluid's elementwise_pow_grad has no Out input.
  template <typename T> static T DY(T x, T y, T, T g) { return g * std::pow(x, y) * std::log(x); }
};

template <typename F, typename T>
absl::Status ForwardKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, *x));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Y", 0, *y));
  OAR_ASSIGN_OR_RETURN(Bcast b, ElementwiseLayout(ctx.op().type, x->dims(), y->dims(), ctx.Attr<int32_t>("axis")));
  const T* xp = x->data<T>();
  const T* yp = y->data<T>();
  T* op = ctx.Output("Out")->mutable_data<T>();
  ForEachBroadcast(b, [&](int64_t e, int64_t j) { op[e] = F::F(xp[e], yp[j]); });
  return absl::OkStatus();
}

// Out (when given) and Out@GRAD have X's shape.
absl::Status ElementwiseGradInferShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Out"), ctx.InputDim("X")));
  if (ctx.HasInput("Out")) OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, "Out", ctx.InputDim("X")));
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim("X"));
  ctx.SetOutputDim(GradVarName("Y"), ctx.InputDim("Y"));
  return absl::OkStatus();
}

template <typename F, typename T>
absl::Status GradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dout, RequireInput(ctx, GradVarName("Out")));
  const Tensor* out = ctx.Input("Out");  // only div and pow need it
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, *x));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Y", 0, *y));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *dout));
  if (out != nullptr && out->initialized()) OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Out", 0, *out));
  OAR_ASSIGN_OR_RETURN(Bcast b, ElementwiseLayout(ctx.op().type, x->dims(), y->dims(), ctx.Attr<int32_t>("axis")));
  const T* xp = x->data<T>();
  const T* yp = y->data<T>();
  const T* gp = dout->data<T>();
  const T* outp = out ? out->data<T>() : nullptr;
  auto o = [outp](int64_t e) { return outp ? outp[e] : T(0); };
  if (Tensor* dx = ctx.Output(GradVarName("X"))) {
    T* d = dx->mutable_data<T>();
    ForEachBroadcast(b, [&](int64_t e, int64_t j) { d[e] = F::DX(xp[e], yp[j], o(e), gp[e]); });
  }
  if (Tensor* dy = ctx.Output(GradVarName("Y"))) {
    T* d = dy->mutable_data<T>();
    if (b.same) {
      ForEachBroadcast(b, [&](int64_t e, int64_t j) { d[e] = F::DY(xp[e], yp[j], o(e), gp[e]); });
    } else {  // reduce over the broadcast dimensions
      std::fill(d, d + b.n, T(0));
      ForEachBroadcast(b, [&](int64_t e, int64_t j) { d[j] += F::DY(xp[e], yp[j], o(e), gp[e]); });
    }
  }
  return absl::OkStatus();
}

template <typename F>
void RegisterBinary(OpRegistry* r, const std::string& type, bool grad_needs_out) {
  std::vector<std::string> fwd_outs;
  if (grad_needs_out) fwd_outs.push_back("Out");
  r->Register(type).Input("X").Input("Y").Output("Out").Attr("axis", int32_t{-1})
      .SetInferShape(ElementwiseInferShape)
      .SetGradMaker(GradOpMaker({"X", "Y"}, fwd_outs, {"Out"}, {"X", "Y"}))
      .Kernel<float>(ForwardKernel<F, float>).template Kernel<double>(ForwardKernel<F, double>);
  r->Register(type + "_grad").Input("X").Input("Y").Input("Out", kDispensable)
      .Input(GradVarName("Out")).Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable).Attr("axis", int32_t{-1})
      .SetInferShape(ElementwiseGradInferShape)
      .Kernel<float>(GradKernel<F, float>).template Kernel<double>(GradKernel<F, double>);
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
}

}  // namespace oar
