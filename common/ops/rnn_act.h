// The activations and helpers Fluid's LoD recurrent ops share (lstm_op.cc,
// gru_ops.cc): activations by name or number, applied and differentiated
// from their output, in double.
//
// Thread-safety: stateless.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/framework/tensor.h"

namespace oar::rnn {

enum class Act { kSigmoid, kTanh, kRelu, kIdentity };

inline absl::StatusOr<Act> ParseAct(const std::string& op, const std::string& name) {
  if (name == "sigmoid") return Act::kSigmoid;
  if (name == "tanh") return Act::kTanh;
  if (name == "relu") return Act::kRelu;
  if (name == "identity" || name == "linear") return Act::kIdentity;
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": activation '", name, "' is not sigmoid, tanh, relu or identity"));
}
inline absl::StatusOr<Act> ActByNumber(const std::string& op,
                                       int v) {  // gru_unit: identity 0, sigmoid 1, tanh 2, relu 3
  static const char* kNames[] = {"identity", "sigmoid", "tanh", "relu"};
  if (v < 0 || v > 3) return absl::InvalidArgumentError(absl::StrCat(op, ": activation ", v, " is not 0-3"));
  return ParseAct(op, kNames[v]);
}
inline double Apply(Act a, double x) {
  switch (a) {
    case Act::kSigmoid:
      return 1 / (1 + std::exp(-x));
    case Act::kTanh:
      return std::tanh(x);
    case Act::kRelu:
      return x > 0 ? x : 0;
    case Act::kIdentity:
      return x;
  }
  return x;
}
inline double Slope(Act a, double y) {  // from the activation's output
  switch (a) {
    case Act::kSigmoid:
      return y * (1 - y);
    case Act::kTanh:
      return 1 - y * y;
    case Act::kRelu:
      return y > 0 ? 1 : 0;
    case Act::kIdentity:
      return 1;
  }
  return 1;
}

inline std::vector<double> ToDouble(const Tensor* t) {
  return t ? std::vector<double>(t->data<float>(), t->data<float>() + t->numel()) : std::vector<double>{};
}

// The time order of one sequence: rows b..e−1, backwards when reversed.
inline std::vector<int64_t> Steps(size_t b, size_t e, bool reverse) {
  std::vector<int64_t> s;
  for (size_t i = b; i < e; ++i) s.push_back(static_cast<int64_t>(i));
  if (reverse) std::reverse(s.begin(), s.end());
  return s;
}

}  // namespace oar::rnn
