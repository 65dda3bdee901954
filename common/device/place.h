// Place: where a tensor's memory lives and a kernel runs, in Fluid's names:
// CPUPlace(), CUDAPlace(id) (device memory of one GPU, its kernels on that
// GPU's stream) and CUDAPinnedPlace() (page-locked host memory, readable by
// CPU kernels and copied to and from GPUs by DMA).
//
// Thread-safety: a value type.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"

namespace oar {

struct Place {
  enum class Kind { kCPU = 0, kCUDA = 1, kCUDAPinned = 2 };
  Kind kind = Kind::kCPU;
  int device = 0;  // the CUDA device ordinal (kCUDA only)

  bool is_cpu() const { return kind == Kind::kCPU; }
  bool is_gpu() const { return kind == Kind::kCUDA; }
  bool is_pinned() const { return kind == Kind::kCUDAPinned; }
  // Host memory (plain or pinned): CPU kernels may read and write it.
  bool is_host() const { return kind != Kind::kCUDA; }
  std::string ToString() const {
    switch (kind) {
      case Kind::kCPU:
        return "CPUPlace";
      case Kind::kCUDAPinned:
        return "CUDAPinnedPlace";
      case Kind::kCUDA:
        break;
    }
    return absl::StrCat("CUDAPlace(", device, ")");
  }
  friend bool operator==(const Place& a, const Place& b) {
    return a.kind == b.kind && (!a.is_gpu() || a.device == b.device);
  }
};

inline Place CPUPlace() { return Place{}; }
inline Place CUDAPlace(int device) { return Place{Place::Kind::kCUDA, device}; }
inline Place CUDAPinnedPlace() { return Place{Place::Kind::kCUDAPinned, 0}; }

}  // namespace oar
