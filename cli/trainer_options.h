// TrainerSetupFor: how the trainer role of `oar run` (cli/trainer_role.h)
// sets up its TrainerRuntime from the flags, the role's environment and the
// transpiled job: the loss and pservers, the communicator or GEO-SGD the
// program was transpiled for, the places (--cpu_num, CPU_NUM, --device),
// the RPC options, the settings every trainer of the job must share, and
// its batch (--batch_size over the trainers, checked against the places).
//
//   OAR_ASSIGN_OR_RETURN(TrainerSetup setup, TrainerSetupFor(env, io, t, nccl2, origin, profiler, place));
//
// Thread-safety: reads the process's flags; call from the role's thread.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "cli/role_env.h"
#include "cli/trainer_role.h"
#include "common/device/place.h"
#include "common/framework/program_desc.h"
#include "trainer/trainer_runtime.h"
#include "transpiler/distribute_transpiler.h"

namespace oar::cli {

struct TrainerSetup {
  TrainerRuntime::Options options;
  int64_t batch = 1;  // this trainer's share of --batch_size
};

// `origin` (for --params in nccl2 mode) and `profiler` must outlive the
// runtime made from the options.
absl::StatusOr<TrainerSetup> TrainerSetupFor(const RoleEnv& env, const TrainerIo& io, const DistributeTranspiler& t,
                                             bool nccl2, const ProgramDesc& origin, Profiler* profiler,
                                             const Place& place);

}  // namespace oar::cli
