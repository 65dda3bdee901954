// top_k, top_k_v2 (Paddle 2.x; their gradients are in sort_ops.cc) and
// accuracy (no gradient, as in Fluid).
#include <algorithm>
#include <numeric>

#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// The axis top-k works along: top_k's last; top_k_v2's `axis`.
int TopKAxis(const OpDesc& op, int rank) {
  const int axis = op.type == "top_k_v2" ? op.GetAttr<int32_t>("axis") : -1;
  return axis < 0 ? axis + rank : axis;
}

absl::Status TopKInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X");
  int k = ctx.Attr<int32_t>("k");
  if (x.size() < 1) return ctx.Error("X must have rank >= 1");
  const int axis = TopKAxis(ctx.op(), x.size());
  if (axis < 0 || axis >= x.size()) return ctx.Error("axis outside X", x.ToString());
  const int64_t len = x[axis];
  if (k < 1 || (len >= 0 && k > len)) {
    return ctx.Error("k=", k, " must be in [1, ", len, "] for X", x.ToString());
  }
  DDim out = x;
  out[axis] = k;
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDim("Indices", out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  ctx.SetOutputDtype("Indices", DataType::kInt64);
  ctx.ShareLoD("X", "Out");
  ctx.ShareLoD("X", "Indices");  // as Fluid: ctc_greedy_decoder aligns the indices per sequence
  return absl::OkStatus();
}

// The k largest (top_k_v2 with largest=false: smallest) along the axis,
// sorted, the first of equal values first.
template <typename T>
absl::Status TopKKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const int64_t k = ctx.Attr<int32_t>("k");
  const DDim& d = x->dims();
  const int axis = TopKAxis(ctx.op(), d.size());
  const bool largest = ctx.op().type != "top_k_v2" || ctx.Attr<bool>("largest");
  const int64_t outer = d.Product(0, axis), len = d[axis], inner = d.Product(axis + 1, d.size());
  T* out = ctx.Output("Out")->mutable_data<T>();
  int64_t* idx = ctx.Output("Indices")->mutable_data<int64_t>();
  const T* xp = x->data<T>();
  std::vector<int64_t> order(static_cast<size_t>(len));
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t i = 0; i < inner; ++i) {
      auto v = [&](int64_t j) { return xp[(a * len + j) * inner + i]; };
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t l, int64_t r) {
        return (largest ? v(l) > v(r) : v(l) < v(r)) || (v(l) == v(r) && l < r);
      });
      for (int64_t j = 0; j < k; ++j) {
        out[(a * k + j) * inner + i] = v(order[j]);
        idx[(a * k + j) * inner + i] = order[j];
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AccuracyInferShape(InferShapeContext& ctx) {
  DDim idx = ctx.InputDim("Indices"), label = ctx.InputDim("Label");
  if (idx.size() != 2 || label.size() != 2 || (label[1] >= 0 && label[1] != 1)) {
    return ctx.Error("expects Indices [N, k] and Label [N, 1], got Indices", idx.ToString(), " and Label",
                     label.ToString());
  }
  if (idx[0] >= 0 && label[0] >= 0 && idx[0] != label[0]) {
    return ctx.Error("Indices", idx.ToString(), " and Label", label.ToString(), " have different batch sizes");
  }
  ctx.SetOutputDim("Accuracy", DDim{1});
  ctx.SetOutputDim("Correct", DDim{1});
  ctx.SetOutputDim("Total", DDim{1});
  ctx.SetOutputDtype("Accuracy", DataType::kFloat32);
  ctx.SetOutputDtype("Correct", DataType::kInt32);
  ctx.SetOutputDtype("Total", DataType::kInt32);
  return absl::OkStatus();
}

absl::Status AccuracyKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, "Indices"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Indices", *idx));
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Label", *label));
  const int64_t n = idx->dims()[0], k = idx->dims()[1];
  const int64_t* ip = idx->data<int64_t>();
  const int64_t* lp = label->data<int64_t>();
  int32_t correct = 0;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      if (ip[r * k + j] == lp[r]) {
        ++correct;
        break;
      }
    }
  }
  ctx.Output("Accuracy")->mutable_data<float>()[0] = n ? float(correct) / float(n) : 0.f;
  if (Tensor* c = ctx.Output("Correct")) c->mutable_data<int32_t>()[0] = correct;
  if (Tensor* t = ctx.Output("Total")) t->mutable_data<int32_t>()[0] = static_cast<int32_t>(n);
  return absl::OkStatus();
}

DataType AccuracyDtype(const ExecutionContext&) { return DataType::kFloat32; }

}  // namespace

void RegisterMetricOps(OpRegistry* r) {
  r->Register("top_k")
      .NotInPlace()
      .Input("X")
      .Output("Out")
      .Output("Indices")
      .Attr("k", int32_t{1})
      .SetInferShape(TopKInferShape)
      .SetGradMaker(GradOpMaker({"X"}, {"Indices"}, {"Out"}, {"X"}))
      .Kernel<float>(TopKKernel<float>)
      .Kernel<double>(TopKKernel<double>);
  // Paddle 2.x's form (any axis, largest or smallest); results always come
  // sorted, which `sorted: false` allows.
  r->Register("top_k_v2")
      .NotInPlace()
      .Input("X")
      .Input("K", kUnimplemented)
      .Output("Out")
      .Output("Indices")
      .Attr("k", int32_t{1})
      .Attr("axis", int32_t{-1})
      .Attr("largest", true)
      .Attr("sorted", true)
      .SetInferShape(TopKInferShape)
      .SetGradMaker(GradOpMaker({"X"}, {"Indices"}, {"Out"}, {"X"}))
      .Kernel<float>(TopKKernel<float>)
      .Kernel<double>(TopKKernel<double>);
  r->Register("accuracy")
      .Input("Out")
      .Input("Indices")
      .Input("Label")
      .Output("Accuracy")
      .Output("Correct", kDispensable)
      .Output("Total", kDispensable)
      .SetInferShape(AccuracyInferShape)
      .SetKernelDtype(AccuracyDtype)
      .Kernel<float>(AccuracyKernel);
}

}  // namespace oar
