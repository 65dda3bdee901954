// log_softmax (paddle.nn.functional.log_softmax) along `axis`, and its
// gradient from Out: out = x − max − log Σ exp(x − max) along each fibre;
// dx = dy − exp(out) · Σ dy. Sums in double.
//
// Thread-safety: stateless kernels.
#include <cmath>

#include "common/op_registry.h"
#include "common/ops/loss_util.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

using namespace loss_util;  // NOLINT

absl::Status Shape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(CheckAxis(ctx, "X", ctx.InputDim("X")));
  return SameShapeAsX(ctx);
}

template <typename T>
absl::Status Forward(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, *x));
  const AxisView v = ViewAlong(x->dims(), ctx.Attr<int32_t>("axis"));
  const T* xp = x->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(x->dims());
  for (int64_t r = 0; r < v.rows(); ++r) {
    const int64_t b = v.Base(r);
    double mx = xp[b];
    for (int64_t c = 1; c < v.n; ++c) mx = std::max<double>(mx, xp[b + c * v.post]);
    double sum = 0;
    for (int64_t c = 0; c < v.n; ++c) sum += std::exp(xp[b + c * v.post] - mx);
    const double shift = mx + std::log(sum);
    for (int64_t c = 0; c < v.n; ++c) o[b + c * v.post] = static_cast<T>(xp[b + c * v.post] - shift);
  }
  return absl::OkStatus();
}

absl::Status GradShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(ExpectLikeInput(ctx, GradVarName("Out"), "Out"));
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim("Out"));
  return absl::OkStatus();
}

template <typename T>
absl::Status Backward(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const AxisView v = ViewAlong(out->dims(), ctx.Attr<int32_t>("axis"));
  const T* y = out->data<T>();
  const T* gy = g->data<T>();
  T* d = dx->mutable_data<T>(out->dims());
  for (int64_t r = 0; r < v.rows(); ++r) {
    const int64_t b = v.Base(r);
    double sum = 0;
    for (int64_t c = 0; c < v.n; ++c) sum += gy[b + c * v.post];
    for (int64_t c = 0; c < v.n; ++c) {
      const int64_t i = b + c * v.post;
      d[i] = static_cast<T>(gy[i] - std::exp(static_cast<double>(y[i])) * sum);
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterLogSoftmaxOp(OpRegistry* r) {
  r->Register("log_softmax").Input("X").Output("Out").Attr("axis", int32_t{-1}).Attr("use_mkldnn", false)
      .SetInferShape(Shape).SetGradMaker(GradOpMaker({}, {"Out"}, {"Out"}, {"X"}))
      .Kernel<float>(Forward<float>).Kernel<double>(Forward<double>);
  r->Register("log_softmax_grad").Input("Out").Input(GradVarName("Out")).Output(GradVarName("X"), kDispensable)
      .Attr("axis", int32_t{-1}).Attr("use_mkldnn", false).SetInferShape(GradShape)
      .Kernel<float>(Backward<float>).Kernel<double>(Backward<double>);
}

}  // namespace oar
