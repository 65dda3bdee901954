// The places a ParallelExecutor runs on: explicit, or CPU_NUM CPU places as
// Fluid reads them (unset means 1, with a warning).
//
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device/place.h"

namespace oar {

// CPU_NUM CPU places; InvalidArgument naming the value when it is not a
// positive integer.
absl::StatusOr<std::vector<Place>> CpuPlacesFromEnv();
std::vector<Place> CpuPlaces(int n);

// InvalidArgument, naming `what` (the flag or variable that asked for them),
// when `places` places cannot each take at least one example of a `batch`
// batch. Checked before any place is built: a ParallelExecutor over a
// million places would take the host's memory before its feed check ran.
absl::Status CheckPlacesFitBatch(int64_t places, int64_t batch, const std::string& what);

}  // namespace oar
