// The broadcast layout of Fluid's elementwise ops: Y's shape (trailing 1s
// dropped) must equal X's dimensions [axis, axis + rank(Y)); with axis = -1
// Y aligns to X's trailing dimensions. X is viewed as [pre, n, post] and Y
// as [n]. Shared by the elementwise ops and the fused elementwise+activation
// op.
//
// Thread-safety: stateless.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/framework/ddim.h"

namespace oar {

struct Bcast {
  int64_t pre = 1, n = 1, post = 1;
  bool same = true;  // X and Y have equal shapes
};

// Computes the broadcast layout, or an error naming both shapes.
inline absl::StatusOr<Bcast> ElementwiseLayout(const std::string& op, const DDim& x, DDim y, int axis) {
  Bcast b;
  if (x == y) {
    b.n = x.numel();
    return b;
  }
  b.same = false;
  // As Fluid: the default axis comes from Y's rank as given, then Y's
  // trailing 1s are dropped (all of them: a Y of [1] is a scalar).
  if (axis == -1) axis = x.size() - y.size();
  while (y.size() > 0 && y[y.size() - 1] == 1) {
    DDim t;
    for (int i = 0; i < y.size() - 1; ++i) t.push_back(y[i]);
    y = t;
  }
  if (axis < 0 || axis + y.size() > x.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": cannot broadcast Y", y.ToString(), " into X", x.ToString(), " at axis ", axis));
  }
  for (int i = 0; i < y.size(); ++i) {
    if (x[axis + i] >= 0 && y[i] >= 0 && x[axis + i] != y[i]) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": Y", y.ToString(), " does not match X", x.ToString(),
                                                     " at axis ", axis, " (dimension ", axis + i, ": ", x[axis + i],
                                                     " vs ", y[i], ")"));
    }
  }
  b.pre = x.Product(0, axis);
  b.n = y.numel();
  b.post = x.Product(axis + y.size(), x.size());
  return b;
}

// Applies fn(e, j) over X's [pre, n, post] layout: e is the flat index into
// X/Out and j the index into Y. Three loop shapes so the common cases (equal
// shapes, a bias over the last axis) vectorize.
template <typename Fn>
void ForEachBroadcast(const Bcast& b, Fn fn) {
  if (b.same) {
    for (int64_t e = 0; e < b.n; ++e) fn(e, e);
  } else if (b.post == 1) {
    for (int64_t i = 0; i < b.pre; ++i) {
      for (int64_t j = 0; j < b.n; ++j) fn(i * b.n + j, j);
    }
  } else {
    for (int64_t i = 0; i < b.pre; ++i) {
      for (int64_t j = 0; j < b.n; ++j) {
        const int64_t base = (i * b.n + j) * b.post;
        for (int64_t k = 0; k < b.post; ++k) fn(base + k, j);
      }
    }
  }
}

}  // namespace oar
