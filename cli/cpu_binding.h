// Which CPUs each trainer of a one-host `oar launch` runs on.
//
// A host with more processes than CPUs (2 pservers and 2 trainers on 2
// cores) lets the scheduler stack both trainers on one core while a pserver
// runs on the other, and move a trainer between cores mid-step, cold L2 and
// all. Binding trainer i to its own share of the CPUs (the pservers, whose
// work comes in bursts between the trainers' steps, run on any) keeps each
// trainer's working set on its core: measured on a 2-core host, a 2 x 2
// fashion_mlp job trains 5–9% more examples/s (`bench/dist_step_bench`).
//
// Thread-safety: functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace oar::cli {

// The CPUs this process may run on (its affinity mask: a cgroup's or
// taskset's limits, not only the host's count), ascending.
std::vector<int> AllowedCpus();

// Per trainer, the CPUs it is bound to: `allowed` dealt out in contiguous
// shares, the first `allowed.size() % trainers` trainers one CPU more.
// `mode`: 1 binds (an error when there are more trainers than CPUs: each
// needs one of its own), 0 does not (every list empty), -1 binds only when
// the `processes` of the job outnumber the CPUs and the trainers do not.
absl::StatusOr<std::vector<std::vector<int>>> TrainerCpus(const std::vector<int>& allowed, int trainers, int processes,
                                                          int mode);

// "0-3,8": a CPU list as taskset and /proc/<pid>/status write it.
std::string CpuListText(const std::vector<int>& cpus);

}  // namespace oar::cli
