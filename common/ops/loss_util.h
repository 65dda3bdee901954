// Helpers shared by the softmax and cross-entropy kernels: safe log, the
// [rows, classes] view of the last axis, a row-wise softmax, and label checks.
//
// Thread-safety: stateless.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/op_context.h"
#include "common/status.h"

namespace oar::loss_util {

// log() that stays finite for probabilities that underflowed to 0.
template <typename T>
inline T SafeLog(T p) {
  return std::log(std::max(p, std::numeric_limits<T>::min()));
}

// Rows along the last axis: [rows, classes].
inline std::pair<int64_t, int64_t> RowsCols(const DDim& d) {
  int64_t cols = d.size() ? d[d.size() - 1] : 1;
  return {cols ? d.numel() / cols : 0, cols};
}

// Fluid's softmax takes `axis`; Oar supports the last axis, the only one
// Fluid 1.x's kernels accepted.
inline absl::Status CheckLastAxis(InferShapeContext& ctx, const DDim& d) {
  int axis = ctx.Attr<int32_t>("axis");
  if (axis != -1 && axis != d.size() - 1) {
    return ctx.Error("only the last axis is supported, got axis=", axis, " for rank ", d.size());
  }
  return absl::OkStatus();
}

template <typename T>
inline void SoftmaxRows(const T* x, T* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    T mx = *std::max_element(xr, xr + cols);
    T sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += (yr[c] = std::exp(xr[c] - mx));
    T inv = T(1) / sum;
    for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
  }
}

inline absl::Status CheckLabelShape(InferShapeContext& ctx, const DDim& x, const DDim& label,
                             const char* x_slot) {
  bool soft = ctx.Attr<bool>("soft_label");
  if (x.size() < 1 || label.size() < 1) {  // the class axis is the last one
    return ctx.Error(x_slot, x.ToString(), " and Label", label.ToString(), " must have rank >= 1");
  }
  if (x.size() != label.size()) {
    return ctx.Error("Label", label.ToString(), " must have the rank of ", x_slot, x.ToString());
  }
  for (int i = 0; i + 1 < x.size(); ++i) {
    if (x[i] >= 0 && label[i] >= 0 && x[i] != label[i]) {
      return ctx.Error("Label", label.ToString(), " and ", x_slot, x.ToString(),
                       " differ in dimension ", i);
    }
  }
  int64_t last = label[label.size() - 1];
  if (!soft && last != 1 && last >= 0) {
    return ctx.Error("hard Label", label.ToString(), " must have last dimension 1");
  }
  if (soft && last >= 0 && x[x.size() - 1] >= 0 && last != x[x.size() - 1]) {
    return ctx.Error("soft Label", label.ToString(), " must match ", x_slot, x.ToString());
  }
  return absl::OkStatus();
}

inline DDim LossDims(const DDim& x) {
  DDim d = x;
  d[d.size() - 1] = 1;
  return d;
}

// Checks a loss op's Label dtype: T for soft labels, int64 for hard ones.
template <typename T>
inline absl::Status RequireLabelDtype(const ExecutionContext& ctx, const Tensor& label) {
  const DataType want = ctx.Attr<bool>("soft_label") ? DataTypeOf<T>::value : DataType::kInt64;
  if (label.dtype() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": input Label has dtype ",
                                                 DataTypeName(label.dtype()), ", expected ", DataTypeName(want)));
}

// Validates a hard label value against the class count.
inline absl::Status CheckLabelValue(const ExecutionContext& ctx, int64_t label, int64_t row,
                             int64_t classes) {
  if (label < 0 || label >= classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        ctx.op().type, ": label ", label, " in row ", row, " is outside [0, ", classes, ")"));
  }
  return absl::OkStatus();
}

}  // namespace oar::loss_util
