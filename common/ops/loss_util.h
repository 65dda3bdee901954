// Helpers shared by the softmax and cross-entropy kernels: safe log, the
// [rows, classes] view of the last axis and the [pre, n, post] view along any
// axis, softmax along it, and label checks.
//
// Thread-safety: stateless.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/base/status.h"
#include "common/framework/op_context.h"

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

// A tensor seen along its class axis as [pre, n, post]: fibre r (one of
// pre * post) holds the n elements Base(r) + c * post. For the last axis
// post is 1 and the fibres are contiguous rows.
struct AxisView {
  int64_t pre = 1, n = 1, post = 1;
  int64_t rows() const { return pre * post; }
  int64_t Base(int64_t r) const { return (r / post) * n * post + r % post; }
};

// `axis` may count from the end (-1 is the last), as in Fluid.
inline int NormalizeAxis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

inline AxisView ViewAlong(const DDim& d, int axis) {
  AxisView v;
  if (d.size() == 0) return v;
  const int a = NormalizeAxis(axis, d.size());
  for (int i = 0; i < a; ++i) v.pre *= d[i];
  v.n = d[a];
  for (int i = a + 1; i < d.size(); ++i) v.post *= d[i];
  return v;
}

// Checks the op's `axis` attribute against the rank of `d`.
inline absl::Status CheckAxis(InferShapeContext& ctx, const char* slot, const DDim& d) {
  const int axis = ctx.Attr<int32_t>("axis");
  if (d.size() < 1) return ctx.Error(slot, d.ToString(), " must have rank >= 1");
  if (axis < -d.size() || axis >= d.size()) {
    return ctx.Error("axis=", axis, " is outside [", -d.size(), ", ", d.size(), ") for an input of rank ", d.size());
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

// Softmax of every fibre along an axis (contiguous rows when post is 1).
template <typename T>
inline void SoftmaxAlong(const T* x, T* y, const AxisView& v) {
  if (v.post == 1) return SoftmaxRows(x, y, v.pre, v.n);
  for (int64_t r = 0; r < v.rows(); ++r) {
    const int64_t b = v.Base(r);
    T mx = x[b];
    for (int64_t c = 1; c < v.n; ++c) mx = std::max(mx, x[b + c * v.post]);
    T sum = 0;
    for (int64_t c = 0; c < v.n; ++c) sum += (y[b + c * v.post] = std::exp(x[b + c * v.post] - mx));
    const T inv = T(1) / sum;
    for (int64_t c = 0; c < v.n; ++c) y[b + c * v.post] *= inv;
  }
}

// Label against X along the class axis `axis` (the last one unless given):
// the same rank and dimensions, except that a hard label has 1 class.
inline absl::Status CheckLabelShape(InferShapeContext& ctx, const DDim& x, const DDim& label, const char* x_slot,
                                    int axis = -1) {
  bool soft = ctx.Attr<bool>("soft_label");
  if (x.size() < 1 || label.size() < 1) {
    return ctx.Error(x_slot, x.ToString(), " and Label", label.ToString(), " must have rank >= 1");
  }
  if (x.size() != label.size()) {
    return ctx.Error("Label", label.ToString(), " must have the rank of ", x_slot, x.ToString());
  }
  const int a = NormalizeAxis(axis, x.size());
  for (int i = 0; i < x.size(); ++i) {
    if (i != a && x[i] >= 0 && label[i] >= 0 && x[i] != label[i]) {
      return ctx.Error("Label", label.ToString(), " and ", x_slot, x.ToString(), " differ in dimension ", i);
    }
  }
  const int64_t classes = label[a];
  if (!soft && classes != 1 && classes >= 0) {
    return ctx.Error("hard Label", label.ToString(), " must be 1 along the class axis (dimension ", a, ")");
  }
  if (soft && classes >= 0 && x[a] >= 0 && classes != x[a]) {
    return ctx.Error("soft Label", label.ToString(), " must match ", x_slot, x.ToString());
  }
  return absl::OkStatus();
}

// The loss's shape: X with the class axis reduced to 1.
inline DDim LossDims(const DDim& x, int axis = -1) {
  DDim d = x;
  d[NormalizeAxis(axis, d.size())] = 1;
  return d;
}

// Checks a loss op's Label dtype: T for soft labels, int64 for hard ones.
template <typename T>
inline absl::Status RequireLabelDtype(const ExecutionContext& ctx, const Tensor& label) {
  const DataType want = ctx.Attr<bool>("soft_label") ? DataTypeOf<T>::value : DataType::kInt64;
  if (label.dtype() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": input Label has dtype ", DataTypeName(label.dtype()),
                                                 ", expected ", DataTypeName(want)));
}

// Validates a hard label value against the class count.
inline absl::Status CheckLabelValue(const ExecutionContext& ctx, int64_t label, int64_t row, int64_t classes) {
  if (label < 0 || label >= classes) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": label ", label, " in row ", row, " is outside [0, ", classes, ")"));
  }
  return absl::OkStatus();
}

}  // namespace oar::loss_util
