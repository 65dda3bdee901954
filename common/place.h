// Place: where a tensor's memory lives and a kernel runs. CPU now; a CUDA
// device id when Oar is built with CUDA.
//
// Thread-safety: a value type.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"

namespace oar {

struct Place {
  enum class Kind { kCPU = 0, kCUDA = 1 };
  Kind kind = Kind::kCPU;
  int device = 0;

  bool is_cpu() const { return kind == Kind::kCPU; }
  std::string ToString() const {
    return is_cpu() ? "CPUPlace" : absl::StrCat("CUDAPlace(", device, ")");
  }
  friend bool operator==(const Place& a, const Place& b) {
    return a.kind == b.kind && (a.is_cpu() || a.device == b.device);
  }
};

inline Place CPUPlace() { return Place{}; }
inline Place CUDAPlace(int device) { return Place{Place::Kind::kCUDA, device}; }

}  // namespace oar
