#include "common/device/gpu_info.h"

#include <atomic>
#include <cstdlib>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/config.h"

#if OAR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace oar {
namespace {

std::string VisibleDevicesNote() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v == nullptr ? "CUDA_VISIBLE_DEVICES unset" : absl::StrCat("CUDA_VISIBLE_DEVICES='", v, "'");
}

struct Probe {
  int count = 0;
  std::string reason;
};

// Asked once: cudaGetDeviceCount initialises the driver, which is slow.
const Probe& ProbeGpus() {
  static const Probe probe = [] {
    Probe p;
#if OAR_HAVE_CUDA
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      p.reason = absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorString(e), " (", VisibleDevicesNote(), ")");
      cudaGetLastError();  // not sticky: later calls must not see it
    } else if (n == 0) {
      p.reason = absl::StrCat("CUDA sees no device (", VisibleDevicesNote(), ")");
    } else {
      p.count = n;
    }
#else
    p.reason = "this oar was built without CUDA (configure with nvcc on PATH, or -DOAR_WITH_CUDA=ON)";
#endif
    return p;
  }();
  return probe;
}

}  // namespace

bool BuiltWithCuda() { return OAR_HAVE_CUDA != 0; }

int GpuCount() { return ProbeGpus().count; }

std::string NoGpuReason() { return ProbeGpus().reason; }

absl::Status RequireGpu(int device) {
  const Probe& p = ProbeGpus();
  if (p.count == 0) return absl::FailedPreconditionError(absl::StrCat("no GPU is visible to this process: ", p.reason));
  if (device < 0 || device >= p.count) {
    return absl::FailedPreconditionError(absl::StrCat("CUDAPlace(", device, "): only ", p.count, " GPU",
                                                      p.count == 1 ? " is" : "s are", " visible (",
                                                      VisibleDevicesNote(), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ParseSelectedGpus(const std::string& spec, int visible) {
  if (visible == 0)
    return absl::FailedPreconditionError(absl::StrCat("no GPU is visible to this process: ", NoGpuReason()));
  std::vector<int> ids;
  if (absl::StripAsciiWhitespace(spec).empty()) {
    for (int i = 0; i < visible; ++i) ids.push_back(i);
    return ids;
  }
  absl::flat_hash_set<int> seen;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    int id = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &id) || id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("selected_gpus='", spec, "': '", part, "' is not a GPU ordinal"));
    }
    if (id >= visible) {
      return absl::InvalidArgumentError(absl::StrCat("selected_gpus='", spec, "': GPU ", id, " is not visible (",
                                                     visible, " visible, ", VisibleDevicesNote(), ")"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat("selected_gpus='", spec, "': GPU ", id, " is listed twice"));
    }
    ids.push_back(id);
  }
  return ids;
}

namespace {
std::atomic<bool> allow_tf32{false};
}  // namespace

void SetGpuAllowTf32(bool allow) { allow_tf32.store(allow, std::memory_order_relaxed); }
bool GpuAllowTf32() { return allow_tf32.load(std::memory_order_relaxed); }

}  // namespace oar
