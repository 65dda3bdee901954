// ExactAuc: the ROC AUC of scores against binary labels, exactly — the
// fraction of (positive, negative) pairs the scores rank right, ties
// counting half — by sorting (O(n log n)). 0 when a class is missing.
//
// Thread-safety: a pure function.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace oar {

inline double ExactAuc(std::vector<std::pair<double, int>> scored) {  // (score, label 0/1)
  std::sort(scored.begin(), scored.end());
  double positives = 0, negatives = 0, right = 0;
  for (size_t i = 0; i < scored.size();) {
    size_t j = i;
    double pos = 0, neg = 0;
    for (; j < scored.size() && scored[j].first == scored[i].first; ++j) (scored[j].second ? pos : neg) += 1;
    right += pos * negatives + pos * neg / 2;  // above every lower negative; ties count half
    positives += pos;
    negatives += neg;
    i = j;
  }
  return positives > 0 && negatives > 0 ? right / positives / negatives : 0.0;
}

}  // namespace oar
