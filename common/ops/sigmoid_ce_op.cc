// sigmoid_cross_entropy_with_logits (+ grad), as Fluid and Paddle define it
// (paddle.nn.functional.binary_cross_entropy_with_logits writes it): per
// element max(x, 0) - x * label + log(1 + exp(-|x|)), zero where the label
// equals ignore_index; `normalize` divides by the count of labels not
// ignored. pos_weight is declared, not implemented.
//
// Thread-safety: stateless kernels.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

absl::Status Shape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(ExpectLikeInput(ctx, "Label", "X"));
  return SameShapeAsX(ctx);
}

absl::Status GradShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(ExpectLikeInput(ctx, "Label", "X"));
  OAR_RETURN_IF_ERROR(ExpectLikeInput(ctx, GradVarName("Out"), "X"));
  return GradSameShapeAsX(ctx);
}

// X and Label of one shape; the divisor `normalize` asks for (1 otherwise).
template <typename T>
absl::StatusOr<double> Inputs(const ExecutionContext& ctx, const Tensor** x, const Tensor** label) {
  OAR_ASSIGN_OR_RETURN(*x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(*label, RequireInput(ctx, "Label"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, **x));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Label", 0, **label));
  if ((*x)->numel() != (*label)->numel()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), "Label"),
                                                   (*label)->dims().ToString(), " differs from ",
                                                   InputLabel(ctx.op(), "X"), (*x)->dims().ToString()));
  }
  if (!ctx.Attr<bool>("normalize")) return 1.0;
  const T ignore = static_cast<T>(ctx.Attr<int32_t>("ignore_index"));
  const T* lp = (*label)->data<T>();
  int64_t kept = 0;
  for (int64_t i = 0; i < (*label)->numel(); ++i) kept += lp[i] != ignore;
  return kept > 0 ? static_cast<double>(kept) : 1e-5;  // as Paddle: no division by zero
}

template <typename T>
absl::Status Forward(const ExecutionContext& ctx) {
  const Tensor *x, *label;
  OAR_ASSIGN_OR_RETURN(const double div, Inputs<T>(ctx, &x, &label));
  const T ignore = static_cast<T>(ctx.Attr<int32_t>("ignore_index"));
  const T* xp = x->data<T>();
  const T* lp = label->data<T>();
  T* out = ctx.Output("Out")->mutable_data<T>(x->dims());
  for (int64_t i = 0; i < x->numel(); ++i) {
    const double v = xp[i];
    out[i] = lp[i] == ignore
                 ? T(0)
                 : static_cast<T>((std::max(v, 0.0) - v * lp[i] + std::log1p(std::exp(-std::abs(v)))) / div);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Backward(const ExecutionContext& ctx) {
  const Tensor *x, *label;
  OAR_ASSIGN_OR_RETURN(const double div, Inputs<T>(ctx, &x, &label));
  OAR_ASSIGN_OR_RETURN(const Tensor* dout, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *dout));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const T ignore = static_cast<T>(ctx.Attr<int32_t>("ignore_index"));
  const T* xp = x->data<T>();
  const T* lp = label->data<T>();
  const T* gp = dout->data<T>();
  T* d = dx->mutable_data<T>(x->dims());
  for (int64_t i = 0; i < x->numel(); ++i) {
    const double sig = 1 / (1 + std::exp(-static_cast<double>(xp[i])));
    d[i] = lp[i] == ignore ? T(0) : static_cast<T>((sig - lp[i]) * gp[i] / div);
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterSigmoidCrossEntropyOps(OpRegistry* r) {
  const std::string type = "sigmoid_cross_entropy_with_logits";
  auto attrs = [](OpInfo& info) -> OpInfo& {
    return info.Attr("ignore_index", int32_t{-100}).Attr("normalize", false);
  };
  attrs(r->Register(type).Input("X").Input("Label").Input("pos_weight", kDispensable | kUnimplemented).Output("Out"))
      .SetInferShape(Shape)
      .SetGradMaker(GradOpMaker({"X", "Label", "pos_weight"}, {}, {"Out"}, {"X"}))
      .Kernel<float>(Forward<float>)
      .Kernel<double>(Forward<double>);
  attrs(r->Register(type + "_grad")
            .Input("X")
            .Input("Label")
            .Input("pos_weight", kDispensable | kUnimplemented)
            .Input(GradVarName("Out"))
            .Output(GradVarName("X"), kDispensable))
      .SetInferShape(GradShape)
      .Kernel<float>(Backward<float>)
      .Kernel<double>(Backward<double>);
}

}  // namespace oar
