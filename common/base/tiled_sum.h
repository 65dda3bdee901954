// SumTiled: out[j] = 0 + in[0][j] + in[1][j] + ... for j in [begin, end),
// each input added in order (the rounding of adding them one after another,
// as Fluid's `sum` op does), a tile of elements at a time, so each input is
// read once and `out` written once while the tile stays in cache. With a
// scale k other than 1 each input element is first rounded to T as
// static_cast<T>(x * k) (k a double), as the `scale` op would make it.
// The `sum` op (common/ops/sum_op.cc) and an elastic pserver's sum of its
// trainers' gradient copies (pserver/var_store_elastic.cc) both run it.
//
// Thread-safety: a pure function of its arguments; disjoint ranges of one
// `out` may be summed concurrently.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace oar {

template <typename T>
void SumTiled(const std::vector<const T*>& in, int64_t begin, int64_t end, T* out, double k = 1) {
  constexpr int64_t kTile = 2048;
  for (int64_t lo = begin; lo < end; lo += kTile) {
    const int64_t hi = std::min(end, lo + kTile);
    std::fill(out + lo, out + hi, T(0));
    for (const T* x : in) {
      if (k == 1) {
        for (int64_t j = lo; j < hi; ++j) out[j] += x[j];
      } else {
        for (int64_t j = lo; j < hi; ++j) out[j] += static_cast<T>(x[j] * k);
      }
    }
  }
}

}  // namespace oar
