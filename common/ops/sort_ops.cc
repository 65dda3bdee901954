// Sorting along an axis, as Fluid and Paddle write it: argsort (Out, the
// sorted values, and Indices; ascending or `descending`, equal values in
// their input order) and its gradient, and the gradients of top_k and
// top_k_v2 (their forwards are in metric_ops.cc): each scatters Out@GRAD
// back to the positions Indices names.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// X viewed as [outer, len, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, len = 1, inner = 1;
};

absl::StatusOr<AxisView> ViewAround(const std::string& op, const DDim& dims, int axis) {
  if (axis < 0) axis += dims.size();
  if (axis < 0 || axis >= dims.size()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": axis outside X", dims.ToString()));
  }
  return AxisView{dims.Product(0, axis), dims[axis], dims.Product(axis + 1, dims.size())};
}

absl::Status ArgsortShape(InferShapeContext& ctx) {
  ctx.SetOutputDim("Out", ctx.InputDim("X"));
  ctx.SetOutputDim("Indices", ctx.InputDim("X"));
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  ctx.SetOutputDtype("Indices", DataType::kInt64);
  return absl::OkStatus();
}

template <typename T>
absl::Status ArgsortKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const AxisView v, ViewAround("argsort", x->dims(), ctx.Attr<int32_t>("axis")));
  const bool descending = ctx.Attr<bool>("descending");
  const T* xp = x->data<T>();
  T* out = ctx.Output("Out")->mutable_data<T>(x->dims());
  int64_t* idx = ctx.Output("Indices")->mutable_data<int64_t>(x->dims());
  std::vector<int64_t> order(static_cast<size_t>(v.len));
  for (int64_t a = 0; a < v.outer; ++a) {
    for (int64_t i = 0; i < v.inner; ++i) {
      auto at = [&](int64_t k) { return (a * v.len + k) * v.inner + i; };
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) {
        return descending ? xp[at(l)] > xp[at(r)] : xp[at(l)] < xp[at(r)];
      });
      for (int64_t k = 0; k < v.len; ++k) {
        out[at(k)] = xp[at(order[static_cast<size_t>(k)])];
        idx[at(k)] = order[static_cast<size_t>(k)];
      }
    }
  }
  return absl::OkStatus();
}

// X@GRAD (X's shape) = Out@GRAD scattered along `axis` to the positions in
// Indices (whose extent along the axis may be smaller: top-k).
template <typename T>
absl::Status ScatterBackKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* ind, RequireInput(ctx, "Indices"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Indices", *ind));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const int axis = ctx.op().HasAttr("axis") ? ctx.Attr<int32_t>("axis") : -1;
  OAR_ASSIGN_OR_RETURN(const AxisView v, ViewAround(ctx.op().type, x->dims(), axis));
  OAR_ASSIGN_OR_RETURN(const AxisView k, ViewAround(ctx.op().type, ind->dims(), axis));
  if (k.outer != v.outer || k.inner != v.inner || g->numel() != ind->numel()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": Indices", ind->dims().ToString(), " and Out@GRAD",
                                                   g->dims().ToString(), " do not fit X", x->dims().ToString()));
  }
  const int64_t* ip = ind->data<int64_t>();
  const T* gp = g->data<T>();
  T* d = dx->mutable_data<T>(x->dims());
  std::fill(d, d + dx->numel(), T(0));
  for (int64_t a = 0; a < v.outer; ++a) {
    for (int64_t j = 0; j < k.len; ++j) {
      for (int64_t i = 0; i < v.inner; ++i) {
        const int64_t from = (a * k.len + j) * v.inner + i, to = ip[from];
        if (to < 0 || to >= v.len) {
          return absl::InvalidArgumentError(
              absl::StrCat(ctx.op().type, ": index ", to, " outside X", x->dims().ToString()));
        }
        d[(a * v.len + to) * v.inner + i] += gp[from];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterSortOps(OpRegistry* r) {
  NumericCpuKernels(r->Register("argsort")
                        .NotInPlace()
                        .Input("X")
                        .Output("Out")
                        .Output("Indices")
                        .Attr("axis", int32_t{-1})
                        .Attr("descending", false)
                        .SetInferShape(ArgsortShape)
                        .SetGradMaker(GradOpMaker({"X"}, {"Indices"}, {"Out"}, {"X"}))
                        .SetKernelDtype(+[](const ExecutionContext& c) { return InputDtypeOf(c, "X"); }),
                    ArgsortKernel<float>, ArgsortKernel<double>, ArgsortKernel<int32_t>, ArgsortKernel<int64_t>);
  for (const char* type : {"argsort_grad", "top_k_grad", "top_k_v2_grad"}) {
    auto& g = r->Register(type)
                  .Input("X")
                  .Input("Indices")
                  .Input(GradVarName("Out"))
                  .Output(GradVarName("X"), kDispensable)
                  .SetInferShape(GradSameShapeAsX)
                  .Kernel<float>(ScatterBackKernel<float>)
                  .Kernel<double>(ScatterBackKernel<double>);
    if (std::string(type) != "top_k_grad") g.Attr("axis", int32_t{-1});
  }
  r->Extend("argsort_grad").Attr("descending", false);
  r->Extend("top_k_grad").Attr("k", int32_t{1});
  r->Extend("top_k_v2_grad").Attr("k", int32_t{1}).Attr("largest", true).Attr("sorted", true);
}

}  // namespace oar
