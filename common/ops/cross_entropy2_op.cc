// cross_entropy2 and cross_entropy_grad2: the hard-label cross-entropy that
// fluid.layers.cross_entropy writes from Fluid 1.6 on. Y = -log(X[label])
// per row of the last axis; MatchX keeps X[label] for the gradient
// (dX[label] = -dY / MatchX, 0 elsewhere) and XShape X's shape, as in
// Fluid. A row whose label is ignore_index has loss 0 and no gradient.
//
// Thread-safety: stateless kernels.
#include "common/framework/op_registry.h"
#include "common/ops/loss_util.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

using loss_util::CheckLabelValue;
using loss_util::LossDims;
using loss_util::RowsCols;
using loss_util::SafeLog;

absl::Status InferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X"), label = ctx.InputDim("Label");
  if (x.size() < 1 || label.size() != x.size() || (label[label.size() - 1] >= 0 && label[label.size() - 1] != 1)) {
    return ctx.Error("expects Label with X's rank and last dimension 1, got X", x.ToString(), " and Label",
                     label.ToString());
  }
  for (int i = 0; i + 1 < x.size(); ++i) {  // one label per row of X
    if (x[i] >= 0 && label[i] >= 0 && x[i] != label[i]) {
      return ctx.Error("expects Label with X's leading dimensions, got X", x.ToString(), " and Label",
                       label.ToString());
    }
  }
  for (const char* out : {"Y", "MatchX"}) {
    ctx.SetOutputDim(out, LossDims(x));
    ctx.SetOutputDtype(out, ctx.InputDtype("X"));
  }
  ctx.SetOutputDim("XShape", XShapeOf(x));
  ctx.SetOutputDtype("XShape", ctx.InputDtype("X"));
  return absl::OkStatus();
}

template <typename T>
absl::Status Kernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Label", *label));
  const auto [rows, cols] = RowsCols(x->dims());
  const T* xp = x->data<T>();
  const int64_t* lp = label->data<int64_t>();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  T* y = ctx.Output("Y")->mutable_data<T>();
  T* match = ctx.Output("MatchX")->mutable_data<T>();
  if (Tensor* xs = ctx.Output("XShape")) xs->mutable_data<T>();
  for (int64_t r = 0; r < rows; ++r) {
    if (lp[r] == ignore) {
      y[r] = match[r] = T(0);
      continue;
    }
    OAR_RETURN_IF_ERROR(CheckLabelValue(ctx, lp[r], r, cols));
    match[r] = xp[r * cols + lp[r]];
    y[r] = -SafeLog(match[r]);
  }
  return absl::OkStatus();
}

absl::Status GradInferShape(InferShapeContext& ctx) {
  const DDim x = FromXShape(ctx.InputDim("XShape"));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Y"), LossDims(x)));
  ctx.SetOutputDim(GradVarName("X"), x);
  return absl::OkStatus();
}

template <typename T>
absl::Status GradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_ASSIGN_OR_RETURN(const Tensor* match, RequireInput(ctx, "MatchX"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, GradVarName("Y")));
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Label", *label));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const auto [rows, cols] = RowsCols(dx->dims());
  const int64_t* lp = label->data<int64_t>();
  const T* mp = match->data<T>();
  const T* g = dy->data<T>();
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  T* d = dx->mutable_data<T>();
  std::fill(d, d + rows * cols, T(0));
  for (int64_t r = 0; r < rows; ++r) {
    if (lp[r] == ignore) continue;
    OAR_RETURN_IF_ERROR(CheckLabelValue(ctx, lp[r], r, cols));
    d[r * cols + lp[r]] = -g[r] / mp[r];
  }
  return absl::OkStatus();
}

DataType GradDtype(const ExecutionContext& ctx) {
  const Tensor* m = ctx.Input("MatchX");
  return m && m->initialized() ? m->dtype() : DataType::kFloat32;
}

}  // namespace

void RegisterCrossEntropy2Ops(OpRegistry* r) {
  r->Register("cross_entropy2")
      .Input("X")
      .Input("Label")
      .Output("Y")
      .Output("XShape")
      .Output("MatchX")
      .Attr("ignore_index", int32_t{-100})
      .SetInferShape(InferShape)
      .SetGradMaker([](const OpDesc& fwd) {
        return std::vector<OpDesc>{
            MakeGradOp(fwd, "cross_entropy_grad2", {"Label"}, {"MatchX", "XShape"}, {"Y"}, {"X"})};
      })
      .Kernel<float>(Kernel<float>)
      .Kernel<double>(Kernel<double>);
  r->Register("cross_entropy_grad2")
      .NotInPlace()
      .Input("Label")
      .Input("MatchX")
      .Input("XShape")
      .Input(GradVarName("Y"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("ignore_index", int32_t{-100})
      .SetInferShape(GradInferShape)
      .SetKernelDtype(GradDtype)
      .Kernel<float>(GradKernel<float>)
      .Kernel<double>(GradKernel<double>);
}

}  // namespace oar
