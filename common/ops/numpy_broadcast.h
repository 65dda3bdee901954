// Broadcasting as numpy and Paddle 2.x's elementwise ops (axis = -1) do it,
// where Fluid's rule (elementwise_layout.h: Y fits inside X) does not: the
// shapes align at their last dimensions, and a dimension of 1 (or a missing
// one) on either side stretches to the other's. The output takes the larger
// of each pair, so X may be the one that stretches ([1, 16, 32] + [8, 16, 32]).
//
//   NumpyBcast b;  OAR_ASSIGN_OR_RETURN(b, NumpyBroadcast("elementwise_add", x, y));
//   b.ForEach([&](int64_t o, int64_t xi, int64_t yi) { out[o] = xp[xi] + yp[yi]; });
//
// Thread-safety: stateless.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/framework/ddim.h"

namespace oar {

struct NumpyBcast {
  DDim out;
  std::vector<int64_t> x_stride, y_stride;  // per output dimension; 0 where that side stretches

  // fn(o, xi, yi) for every output element o, in order.
  template <typename Fn>
  void ForEach(Fn fn) const {
    const int r = out.size();
    const int64_t n = out.numel();
    std::vector<int64_t> idx(static_cast<size_t>(r), 0);
    int64_t xi = 0, yi = 0;
    for (int64_t o = 0; o < n; ++o) {
      fn(o, xi, yi);
      for (int d = r - 1; d >= 0; --d) {  // the next index, carrying
        const size_t k = static_cast<size_t>(d);
        if (++idx[k] < out[d]) {
          xi += x_stride[k];
          yi += y_stride[k];
          break;
        }
        xi -= x_stride[k] * (out[d] - 1);
        yi -= y_stride[k] * (out[d] - 1);
        idx[k] = 0;
      }
    }
  }
};

// The broadcast of x and y, or InvalidArgument naming both shapes and the
// dimension where neither is 1 and they differ.
inline absl::StatusOr<NumpyBcast> NumpyBroadcast(const std::string& op, const DDim& x, const DDim& y) {
  const int r = std::max(x.size(), y.size());
  NumpyBcast b;
  std::vector<int64_t> out(static_cast<size_t>(r));
  b.x_stride.assign(static_cast<size_t>(r), 0);
  b.y_stride.assign(static_cast<size_t>(r), 0);
  int64_t xs = 1, ys = 1;
  for (int d = r - 1; d >= 0; --d) {
    const int xd = d - (r - x.size()), yd = d - (r - y.size());
    const int64_t a = xd >= 0 ? x[xd] : 1, c = yd >= 0 ? y[yd] : 1;
    if (a != c && a != 1 && c != 1) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": X", x.ToString(), " and Y", y.ToString(),
                                                     " do not broadcast (dimension ", d, " of the result: ", a, " vs ",
                                                     c, ")"));
    }
    out[static_cast<size_t>(d)] = std::max(a, c);
    b.x_stride[static_cast<size_t>(d)] = a == 1 ? 0 : xs;
    b.y_stride[static_cast<size_t>(d)] = c == 1 ? 0 : ys;
    xs *= a;
    ys *= c;
  }
  b.out = DDim(out);
  return b;
}

}  // namespace oar
