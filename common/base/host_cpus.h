// The CPUs this process may run on: its affinity mask (taskset, a cpuset),
// not only the host's count, and not a CPU quota (which it cannot see).
// `oar launch` shares them among its processes (cli/host_share.h); the
// benches that stand in for a launch count them the same way.
//
// Thread-safety: a function.
#pragma once

#include <vector>

namespace oar {

// Ascending; every CPU the host reports when the mask cannot be read.
std::vector<int> AllowedCpus();

}  // namespace oar
