// teacher_student_sigmoid_loss (Fluid 1.2+, CTR distillation): each row's
// logit x against a label that encodes the click z and, where present, the
// teacher's score q: label -2 (no q, z=0), -1 (no q, z=1), q (z=0) or 1 + q
// (z=1). The loss is the sigmoid cross-entropy against z plus, where q is
// given, the one against q. The gradient is Fluid's: computed from the logit
// clipped to [soft_max_lower_bound, soft_max_up_bound], zero at the bounds.
//
// Thread-safety: stateless kernels.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// log(1 + e^x) - x z, written to stay finite for large |x|.
template <typename T>
T Xent(T x, T z) {
  return std::max(x, T(0)) - x * z + std::log1p(std::exp(-std::abs(x)));
}

template <typename T>
absl::Status ShapesAgree(const ExecutionContext& ctx, const Tensor& x, const Tensor& label) {
  if (x.numel() != x.dims()[0] || label.numel() != x.dims()[0]) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": X", x.dims().ToString(), " and Label",
                                                   label.dims().ToString(), " must both be one value per row"));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status LossKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_RETURN_IF_ERROR(ShapesAgree<T>(ctx, *x, *label));
  const int64_t n = x->dims()[0];
  T* y = ctx.Output("Y")->mutable_data<T>(DDim{n, 1});
  const T* xs = x->data<T>();
  const T* ls = label->data<T>();
  for (int64_t i = 0; i < n; ++i) {
    const T v = xs[i], l = ls[i];
    if (l < T(-1))
      y[i] = Xent(v, T(0));
    else if (l < T(0))
      y[i] = Xent(v, T(1));
    else if (l < T(1))
      y[i] = Xent(v, T(0)) + Xent(v, l);
    else
      y[i] = Xent(v, T(1)) + Xent(v, l - T(1));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status LossGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, GradVarName("Y")));
  OAR_RETURN_IF_ERROR(ShapesAgree<T>(ctx, *x, *label));
  Tensor* dx_t = ctx.Output(GradVarName("X"));
  if (dx_t == nullptr) return absl::OkStatus();
  const int64_t n = x->dims()[0];
  if (dy->numel() != n)
    return absl::InvalidArgumentError("teacher_student_sigmoid_loss_grad: Y@GRAD is not one per row");
  T* dx = dx_t->mutable_data<T>(x->dims());
  const T hi = static_cast<T>(ctx.Attr<float>("soft_max_up_bound"));
  const T lo = static_cast<T>(ctx.Attr<float>("soft_max_lower_bound"));
  for (int64_t i = 0; i < n; ++i) {
    const T v = std::clamp(x->data<T>()[i], lo, hi);
    const T p = T(1) / (T(1) + std::exp(-v));
    const T l = label->data<T>()[i];
    T g = l < T(-1) ? -p : (l < T(0) ? T(1) - p : l - T(2) * p);
    if (v >= hi || v <= lo) g = T(0);
    dx[i] = -g * dy->data<T>()[i];
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterTeacherStudentLossOp(OpRegistry* r) {
  r->Register("teacher_student_sigmoid_loss")
      .Input("X")
      .Input("Label")
      .Output("Y")
      .Attr("soft_max_up_bound", 15.0f)
      .Attr("soft_max_lower_bound", -15.0f)
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Label"}, {}, {"Y"}, {"X"}))
      .Kernel<float>(LossKernel<float>)
      .Kernel<double>(LossKernel<double>);
  r->Register("teacher_student_sigmoid_loss_grad")
      .Input("X")
      .Input("Label")
      .Input(GradVarName("Y"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("soft_max_up_bound", 15.0f)
      .Attr("soft_max_lower_bound", -15.0f)
      .SetInferShape(GradSameShapeAsX)
      .Kernel<float>(LossGradKernel<float>)
      .Kernel<double>(LossGradKernel<double>);
}

}  // namespace oar
