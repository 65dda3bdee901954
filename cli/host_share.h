// How the processes of a one-host `oar launch` share its CPUs: how many
// BLAS threads each runs, how its waits behave, and which CPUs each trainer
// is bound to — decided from how many processes there are and how many CPUs
// the launcher may use, for what the user did not set.
//
// Waits: while every process has a CPU of its own, a shared-memory wait
// spins (rpc::JobSpinMicros) — the process it waits for runs elsewhere, and
// a futex wake-up costs more. When the processes outnumber the CPUs, waits
// never spin (a spinning waiter takes the CPU its peer needs) and a
// trainer's burst of requests wakes a pserver once
// (--rpc_shm_batch_wakeups).
//
// Binding: with more processes than CPUs the scheduler stacks both trainers
// of a 2 x 2 job on one core while a pserver runs on the other, and moves
// them mid-step, cold L2 and all. Binding trainer i to its own share of the
// CPUs (the pservers, whose work comes in bursts between the trainers'
// steps, run on any) keeps each trainer's working set on its core.
//
// Thread-safety: functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/process_group.h"
#include "common/base/host_cpus.h"

namespace oar::cli {

// Per trainer, the CPUs it is bound to: `allowed` dealt out in contiguous
// shares, the first `allowed.size() % trainers` trainers one CPU more.
// `mode`: 1 binds (an error when there are more trainers than CPUs: each
// needs one of its own), 0 does not (every list empty), -1 binds only when
// the `processes` of the job outnumber the CPUs and the trainers do not.
absl::StatusOr<std::vector<std::vector<int>>> TrainerCpus(const std::vector<int>& allowed, int trainers, int processes,
                                                          int mode);

// What the user set; each unset one is chosen by ChildTuning.
struct UserTuning {
  bool blas_threads = false;   // OPENBLAS_NUM_THREADS in the environment
  bool batch_wakeups = false;  // --rpc_shm_batch_wakeups >= 0
  bool shm_spin = false;       // --rpc_shm_spin_us >= 0
};

// The flags and environment every child of a job of `processes` on `cpus`
// CPUs gets.
struct Tuning {
  std::vector<std::string> flags;
  std::vector<std::pair<std::string, std::string>> env;
};
Tuning ChildTuning(int processes, int cpus, const UserTuning& user);

// Gives a job's children (`specs`: the `pservers` first, then the
// `trainers`, as `oar launch` orders them) their tuning and the trainers
// their CPUs (`bind_mode` as TrainerCpus's). Returns the line that says
// where the trainers were bound, or "" when they were not.
absl::StatusOr<std::string> ShareHost(std::vector<ChildSpec>* specs, int pservers, int trainers, int bind_mode,
                                      const UserTuning& user);

// "0-3,8": a CPU list as taskset and /proc/<pid>/status write it.
std::string CpuListText(const std::vector<int>& cpus);

}  // namespace oar::cli
