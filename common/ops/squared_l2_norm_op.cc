// squared_l2_norm (+ grad): the sum of X's squares, as one value (shape
// [1]). paddle.nn.ClipGradByGlobalNorm writes one per gradient, sums them
// and scales every gradient by max_norm / max(global norm, max_norm).
// Summed in double.
//
// Thread-safety: stateless kernels.
#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

absl::Status Shape(InferShapeContext& ctx) {
  ctx.SetOutputDim("Out", DDim{1});
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  return absl::OkStatus();
}

template <typename T>
absl::Status Forward(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, *x));
  const T* p = x->data<T>();
  double s = 0;
  for (int64_t i = 0, n = x->numel(); i < n; ++i) s += static_cast<double>(p[i]) * p[i];
  ctx.Output("Out")->mutable_data<T>(DDim{1})[0] = static_cast<T>(s);
  return absl::OkStatus();
}

template <typename T>
absl::Status Backward(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, *x));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  if (g->numel() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("squared_l2_norm_grad: ", InputLabel(ctx.op(), GradVarName("Out")),
                                                   g->dims().ToString(), " must hold one value"));
  }
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const T k = T(2) * g->data<T>()[0];
  const T* p = x->data<T>();
  T* d = dx->mutable_data<T>(x->dims());
  for (int64_t i = 0, n = x->numel(); i < n; ++i) d[i] = k * p[i];
  return absl::OkStatus();
}

}  // namespace

void RegisterSquaredL2NormOps(OpRegistry* r) {
  r->Register("squared_l2_norm")
      .Input("X")
      .Output("Out")
      .SetInferShape(Shape)
      .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
      .Kernel<float>(Forward<float>)
      .Kernel<double>(Forward<double>);
  r->Register("squared_l2_norm_grad")
      .Input("X")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .SetInferShape(GradSameShapeAsX)
      .Kernel<float>(Backward<float>)
      .Kernel<double>(Backward<double>);
}

}  // namespace oar
