// The places a ParallelExecutor runs on: explicit, or CPU_NUM CPU places as
// Fluid reads them (unset means 1, with a warning).
//
// Thread-safety: stateless.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "common/place.h"

namespace oar {

// CPU_NUM CPU places; InvalidArgument naming the value when it is not a
// positive integer.
absl::StatusOr<std::vector<Place>> CpuPlacesFromEnv();
std::vector<Place> CpuPlaces(int n);

}  // namespace oar
