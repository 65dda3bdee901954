// unique (Paddle 2.x: sorted, with optional Indices — first positions —,
// Index — each element's place in Out — and Counts; Fluid 1.x, is_sorted
// false: in order of first appearance, with Index) and unique_with_counts
// (Fluid: Out, Index, Count). Flattened X only (axis [] as Paddle writes by
// default); no gradient.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

template <typename I>
void Put(Tensor* t, const std::vector<int64_t>& v) {
  if (t == nullptr) return;
  I* p = t->mutable_data<I>(DDim{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<I>(v[i]);
}

template <typename T>
absl::Status UniqueKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const bool sorted = ctx.op().type == "unique" && ctx.Attr<bool>("is_sorted");
  if (sorted && !ctx.Attr<std::vector<int32_t>>("axis").empty()) {
    return absl::UnimplementedError("unique: attribute axis (not []) is not implemented (Oar implements axis=[])");
  }
  const T* xp = x->data<T>();
  const int64_t n = x->numel();
  std::vector<int64_t> order(static_cast<size_t>(n));  // positions, by value (stable) or by first appearance
  std::iota(order.begin(), order.end(), 0);
  if (sorted) std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return xp[a] < xp[b]; });
  std::vector<int64_t> first, counts, inverse(static_cast<size_t>(n));
  std::vector<T> values;
  std::map<T, int64_t> slot;
  for (int64_t p : order) {
    auto [it, fresh] = slot.emplace(xp[p], static_cast<int64_t>(values.size()));
    if (fresh) {
      values.push_back(xp[p]);
      first.push_back(p);
      counts.push_back(0);
    }
    inverse[static_cast<size_t>(p)] = it->second;
    ++counts[static_cast<size_t>(it->second)];
  }
  T* o = ctx.Output("Out")->mutable_data<T>(DDim{static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), o);
  const bool i32 = static_cast<DataType>(ctx.Attr<int32_t>("dtype")) == DataType::kInt32;
  auto put = [&](const char* slot_name, const std::vector<int64_t>& v) {
    Tensor* t = ctx.Output(slot_name);
    if (i32)
      Put<int32_t>(t, v);
    else
      Put<int64_t>(t, v);
  };
  put("Index", inverse);
  put("Indices", first);
  put("Counts", counts);
  put("Count", counts);
  return absl::OkStatus();
}

}  // namespace

void RegisterUniqueOps(OpRegistry* r) {
  auto any = +[](const ExecutionContext& c) { return InputDtypeOf(c, "X"); };
  NumericCpuKernels(r->Register("unique")
                        .Input("X")
                        .Output("Out")
                        .Output("Index", kDispensable)
                        .Output("Indices", kDispensable)
                        .Output("Counts", kDispensable)
                        .Attr("dtype", int32_t{3})
                        .Attr("return_index", false)
                        .Attr("return_inverse", false)
                        .Attr("return_counts", false)
                        .Attr("is_sorted", false)
                        .Attr("axis", std::vector<int32_t>{})
                        .SetInferShape(NoShapeInference)
                        .SetKernelDtype(any),
                    UniqueKernel<float>, UniqueKernel<double>, UniqueKernel<int32_t>, UniqueKernel<int64_t>);
  NumericCpuKernels(r->Register("unique_with_counts")
                        .Input("X")
                        .Output("Out")
                        .Output("Index")
                        .Output("Count")
                        .Attr("dtype", int32_t{3})
                        .SetInferShape(NoShapeInference)
                        .SetKernelDtype(any),
                    UniqueKernel<float>, UniqueKernel<double>, UniqueKernel<int32_t>, UniqueKernel<int64_t>);
}

}  // namespace oar
