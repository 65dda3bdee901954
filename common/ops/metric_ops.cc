// top_k, top_k_v2 (Paddle 2.x) and accuracy (no gradients, as in Fluid).
#include <algorithm>
#include <numeric>

#include "common/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

absl::Status TopKInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X");
  int k = ctx.Attr<int32_t>("k");
  if (x.size() < 1) return ctx.Error("X must have rank >= 1");
  if (ctx.op().type == "top_k_v2") {  // Paddle 2.x: any axis; Oar's kernel takes the last
    const int axis = ctx.Attr<int32_t>("axis");
    if (axis != -1 && axis != x.size() - 1) {
      return absl::UnimplementedError(absl::StrCat("top_k_v2: attribute axis=", axis, " for X", x.ToString(),
                                                   " is not implemented (Oar implements the last axis, -1)"));
    }
  }
  int64_t last = x[x.size() - 1];
  if (k < 1 || (last >= 0 && k > last)) {
    return ctx.Error("k=", k, " must be in [1, ", last, "] for X", x.ToString());
  }
  DDim out = x;
  out[out.size() - 1] = k;
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDim("Indices", out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  ctx.SetOutputDtype("Indices", DataType::kInt64);
  ctx.ShareLoD("X", "Out");
  return absl::OkStatus();
}

template <typename T>
absl::Status TopKKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const int64_t k = ctx.Attr<int32_t>("k");
  const int64_t cols = x->dims()[x->dims().size() - 1];
  const int64_t rows = cols ? x->numel() / cols : 0;
  T* out = ctx.Output("Out")->mutable_data<T>();
  int64_t* idx = ctx.Output("Indices")->mutable_data<int64_t>();
  const T* xp = x->data<T>();
  std::vector<int64_t> order(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = xp + r * cols;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [row](int64_t a, int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (int64_t j = 0; j < k; ++j) {
      out[r * k + j] = row[order[j]];
      idx[r * k + j] = order[j];
    }
  }
  return absl::OkStatus();
}

absl::Status AccuracyInferShape(InferShapeContext& ctx) {
  DDim idx = ctx.InputDim("Indices"), label = ctx.InputDim("Label");
  if (idx.size() != 2 || label.size() != 2 || (label[1] >= 0 && label[1] != 1)) {
    return ctx.Error("expects Indices [N, k] and Label [N, 1], got Indices", idx.ToString(),
                     " and Label", label.ToString());
  }
  if (idx[0] >= 0 && label[0] >= 0 && idx[0] != label[0]) {
    return ctx.Error("Indices", idx.ToString(), " and Label", label.ToString(),
                     " have different batch sizes");
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
      if (ip[r * k + j] == lp[r]) { ++correct; break; }
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
  r->Register("top_k").NotInPlace().Input("X").Output("Out").Output("Indices").Attr("k", int32_t{1})
      .SetInferShape(TopKInferShape)
      .Kernel<float>(TopKKernel<float>).Kernel<double>(TopKKernel<double>);
  // Paddle 2.x's form; results always come sorted, which `sorted: false` allows.
  r->Register("top_k_v2").NotInPlace().Input("X").Input("K", kUnimplemented).Output("Out").Output("Indices")
      .Attr("k", int32_t{1}).Attr("axis", int32_t{-1}).Attr("largest", true).Attr("sorted", true)
      .Implements("largest", {true})
      .SetInferShape(TopKInferShape)
      .Kernel<float>(TopKKernel<float>).Kernel<double>(TopKKernel<double>);
  r->Register("accuracy").Input("Out").Input("Indices").Input("Label")
      .Output("Accuracy").Output("Correct", kDispensable).Output("Total", kDispensable)
      .SetInferShape(AccuracyInferShape).SetKernelDtype(AccuracyDtype)
      .Kernel<float>(AccuracyKernel);
}

}  // namespace oar
