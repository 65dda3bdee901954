#include "cli/trainer_options.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cli/command.h"
#include "cli/communicator_flags.h"
#include "cli/program_params.h"
#include "cli/rpc_flags.h"
#include "cli/trainer_failure.h"
#include "common/base/status.h"
#include "gflags/gflags.h"
#include "trainer/places.h"

DECLARE_int32(cpu_num);
DECLARE_bool(fuse_all_reduce_ops);
DECLARE_double(fuse_parameter_memory_size);
DECLARE_string(collective_transport);
DECLARE_string(checkpoint_dir);
DECLARE_int32(epochs);
DECLARE_int32(batch_size);
DECLARE_int32(seed);
DECLARE_int64(limit);
DECLARE_int64(max_steps);
DECLARE_string(params);

namespace oar::cli {

absl::StatusOr<TrainerSetup> TrainerSetupFor(const RoleEnv& env, const TrainerIo& io, const DistributeTranspiler& t,
                                             bool nccl2, const ProgramDesc& origin, Profiler* profiler,
                                             const Place& place) {
  TrainerSetup setup;
  TrainerRuntime::Options& options = setup.options;
  options.profiler = profiler;
  if (nccl2 && FlagGiven("params")) {
    options.after_startup = [&origin](Executor& exe, Scope* scope) -> absl::Status {
      return LoadProgramParams(exe, scope, FLAGS_params, origin);
    };
  }
  options.loss = io.loss;
  options.pservers = env.pservers;
  options.sync_mode = t.config().sync_mode;
  options.communicator = CommunicatorOptionsFromFlags(t.config());
  options.geo_params = GeoParamsOf(t, env.trainer_id);
  options.geo = GeoOptionsOf(t.config(), env.trainers);
  options.nccl2 = nccl2;
  options.build.fuse_all_reduce_ops = FLAGS_fuse_all_reduce_ops;
  options.build.fuse_parameter_memory_size = FLAGS_fuse_parameter_memory_size;
  options.rpc = RpcOptionsFromFlags();
  options.collective_transport = FLAGS_collective_transport;
  options.trainers = env.trainers;
  options.trainer_id = env.trainer_id;
  options.trainer_endpoints = env.trainer_endpoints;
  if (FLAGS_cpu_num < 0) return absl::InvalidArgumentError("--cpu_num must be 0 (the CPU_NUM variable) or positive");
  if (place.is_gpu()) {
    if (FLAGS_cpu_num > 1)
      return absl::InvalidArgumentError("--cpu_num counts CPU places; --device gpu trains on one GPU");
    options.places = {place};
  } else if (FLAGS_cpu_num > 1) {
    options.places = CpuPlaces(FLAGS_cpu_num);
  } else if (FLAGS_cpu_num == 0) {
    OAR_ASSIGN_OR_RETURN(options.places, CpuPlacesFromEnv());
  }
  // --batch_size is the global batch, as in `oar train`: each trainer takes
  // its 1/trainers of it, so a sync job makes the single process's steps.
  const int64_t batch = std::max<int64_t>(1, FLAGS_batch_size / env.trainers);
  setup.batch = batch;
  OAR_RETURN_IF_ERROR(CheckPlacesFitBatch(
      static_cast<int64_t>(options.places.size()), batch,
      absl::StrCat(FLAGS_cpu_num == 0 ? "CPU_NUM" : "--cpu_num", " for trainer ", env.trainer_id, " (batch ", batch,
                   " of --batch_size ", FLAGS_batch_size, " over ", env.trainers, " trainer(s))")));
  // The trainers split the data and the steps by these; nccl2 trainers also
  // scale the loss by every trainer's place count.
  options.settings = {{"batch_size", FLAGS_batch_size},
                      {"seed", FLAGS_seed},
                      {"limit", FLAGS_limit},
                      {"epochs", FLAGS_epochs},
                      {"max_steps", FLAGS_max_steps}};
  if (nccl2)
    options.settings.emplace_back("cpu_num", std::max<int64_t>(1, static_cast<int64_t>(options.places.size())));
  options.incarnation = ThisTrainersIncarnation();  // its ABORT, should it fail, comes from the same run
  options.await_pserver_restarts = !FLAGS_checkpoint_dir.empty();
  return setup;
}

}  // namespace oar::cli
