// fused_elemwise_activation and its grad, as Fluid's fuse_elewise_add_act
// pass emits them: functor_list [act, "elementwise_add"] computes
//   IntermediateOut = X + Y (broadcast at `axis`),  Out = act(IntermediateOut)
// in one pass over memory, for act in {relu, sigmoid, tanh}. The grad op
// (functor_list [act + "_grad", "elementwise_add_grad"]) reads Out, Out@GRAD
// and Y and writes X@GRAD, Y@GRAD (reduced over the broadcast dims) and
// IntermediateOut@GRAD, all optional.
#include <cmath>

#include "absl/strings/str_join.h"
#include "common/framework/op_registry.h"
#include "common/ops/elementwise_layout.h"
#include "common/ops/fused_elemwise.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

template <typename T>
T Apply(FusedAct a, T v) {
  switch (a) {
    case FusedAct::kRelu:
      return v > T(0) ? v : T(0);
    case FusedAct::kSigmoid:
      return T(1) / (T(1) + std::exp(-v));
    case FusedAct::kTanh:
      return std::tanh(v);
  }
  return v;
}

// d act / d v, times g, from the activation's output.
template <typename T>
T Derive(FusedAct a, T out, T g) {
  switch (a) {
    case FusedAct::kRelu:
      return out > T(0) ? g : T(0);
    case FusedAct::kSigmoid:
      return g * out * (T(1) - out);
    case FusedAct::kTanh:
      return g * (T(1) - out * out);
  }
  return g;
}

absl::Status FusedInferShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(ParseFusedFunctors(ctx.op(), "").status());
  const DDim x = ctx.InputDim("X"), y = ctx.InputDim("Y");
  if (ctx.IsRuntime() || (!x.HasUnknown() && !y.HasUnknown())) {
    OAR_RETURN_IF_ERROR(ElementwiseLayout(ctx.op().type, x, y, ctx.Attr<int32_t>("axis")).status());
  }
  ctx.SetOutputDim("Out", x);
  ctx.ShareLoD("X", "Out");
  if (ctx.HasOutput("IntermediateOut")) ctx.SetOutputDim("IntermediateOut", x);
  return absl::OkStatus();
}

template <typename T>
absl::Status FusedKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const FusedAct act, ParseFusedFunctors(ctx.op(), ""));
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(Bcast b, ElementwiseLayout(ctx.op().type, x->dims(), y->dims(), ctx.Attr<int32_t>("axis")));
  const T* xp = x->data<T>();
  const T* yp = y->data<T>();
  T* out = ctx.Output("Out")->mutable_data<T>();
  Tensor* inter = ctx.Output("IntermediateOut");
  if (inter != nullptr) {
    T* ip = inter->mutable_data<T>();
    ForEachBroadcast(b, [&](int64_t e, int64_t j) {
      const T v = xp[e] + yp[j];
      ip[e] = v;
      out[e] = Apply(act, v);
    });
  } else {
    ForEachBroadcast(b, [&](int64_t e, int64_t j) { out[e] = Apply(act, xp[e] + yp[j]); });
  }
  return absl::OkStatus();
}

absl::Status FusedGradInferShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(ParseFusedFunctors(ctx.op(), "_grad").status());
  const DDim out = ctx.InputDim(GradVarName("Out"));
  if (ctx.HasOutput(GradVarName("X"))) ctx.SetOutputDim(GradVarName("X"), out);
  if (ctx.HasOutput(GradVarName("IntermediateOut"))) ctx.SetOutputDim(GradVarName("IntermediateOut"), out);
  if (ctx.HasOutput(GradVarName("Y"))) ctx.SetOutputDim(GradVarName("Y"), ctx.InputDim("Y"));
  return absl::OkStatus();
}

template <typename T>
absl::Status FusedGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const FusedAct act, ParseFusedFunctors(ctx.op(), "_grad"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dout, RequireInput(ctx, GradVarName("Out")));
  if (out->dims() != dout->dims()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": Out", out->dims().ToString(), " and Out@GRAD",
                                                   dout->dims().ToString(), " differ"));
  }
  // X has Out's shape: the layout comes from Out and Y.
  OAR_ASSIGN_OR_RETURN(Bcast b, ElementwiseLayout(ctx.op().type, out->dims(), y->dims(), ctx.Attr<int32_t>("axis")));
  const T* op = out->data<T>();
  const T* gp = dout->data<T>();
  Tensor* dx = ctx.Output(GradVarName("X"));
  Tensor* dinter = ctx.Output(GradVarName("IntermediateOut"));
  Tensor* dy = ctx.Output(GradVarName("Y"));
  T* dxp = dx ? dx->mutable_data<T>() : nullptr;
  T* dip = dinter ? dinter->mutable_data<T>() : nullptr;
  T* dyp = dy ? dy->mutable_data<T>() : nullptr;
  if (dyp != nullptr && !b.same) std::fill(dyp, dyp + b.n, T(0));
  ForEachBroadcast(b, [&](int64_t e, int64_t j) {
    const T dv = Derive(act, op[e], gp[e]);  // d add's output = d X = d Y (before reduction)
    if (dxp) dxp[e] = dv;
    if (dip) dip[e] = dv;
    if (dyp) {
      if (b.same)
        dyp[e] = dv;
      else
        dyp[j] += dv;
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FusedAct> ParseFusedFunctors(const OpDesc& op, const std::string& suffix) {
  const auto list = op.GetAttr<std::vector<std::string>>("functor_list");
  if (list.size() != 2 || list[1] != "elementwise_add" + suffix) {
    return absl::UnimplementedError(absl::StrCat(op.type, ": functor_list must be [relu|sigmoid|tanh", suffix,
                                                 ", elementwise_add", suffix, "], got [", absl::StrJoin(list, ", "),
                                                 "]"));
  }
  if (list[0] == "relu" + suffix) return FusedAct::kRelu;
  if (list[0] == "sigmoid" + suffix) return FusedAct::kSigmoid;
  if (list[0] == "tanh" + suffix) return FusedAct::kTanh;
  return absl::UnimplementedError(absl::StrCat(op.type, ": activation '", list[0], "' is not fusable"));
}

void RegisterFusedOps(OpRegistry* r) {
  r->Register("fused_elemwise_activation")
      .Input("X")
      .Input("Y")
      .Output("Out")
      .Output("IntermediateOut", kDispensable)
      .Attr("axis", int32_t{-1})
      .Attr("scale", 0.0f)
      .Attr("save_intermediate_out", false)
      .Attr("functor_list", std::vector<std::string>{})
      .SetInferShape(FusedInferShape)
      .Kernel<float>(FusedKernel<float>)
      .Kernel<double>(FusedKernel<double>);
  r->Register("fused_elemwise_activation_grad")
      .Input("X", kDispensable)
      .Input("Y")
      .Input("Out")
      .Input("IntermediateOut", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .Output(GradVarName("IntermediateOut"), kDispensable)
      .Attr("axis", int32_t{-1})
      .Attr("scale", 0.0f)
      .Attr("save_intermediate_out", false)
      .Attr("functor_list", std::vector<std::string>{})
      .SetInferShape(FusedGradInferShape)
      .Kernel<float>(FusedGradKernel<float>)
      .Kernel<double>(FusedGradKernel<double>);
}

}  // namespace oar
