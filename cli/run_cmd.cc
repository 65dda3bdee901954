// `oar run`: one process of a distributed job, its role and cluster read
// from the PADDLE_* environment (cli/role_env.h) or flags. Every process
// transpiles the same model the same way (--mode pserver or nccl2); then
//  - a PSERVER runs its startup and pserver programs until every trainer
//    has said COMPLETE (or SIGTERM);
//  - a TRAINER waits (bounded) for the pservers, runs its startup program
//    (pulling the parameters), trains on its shard of Fashion-MNIST (example
//    i of each epoch's order goes to trainer i % trainers) in batches of
//    --batch_size / trainers (so --batch_size is the global batch) on
//    --cpu_num places, says COMPLETE, and trainer 0 evaluates on the test set;
//    with --checkpoint_dir and --checkpoint_every N, trainer 0 has every
//    pserver save a checkpoint after each N steps (checkpoint_notify), and a
//    pserver started with --checkpoint_dir restores from it;
//  - in nccl2 mode there are only trainers (PADDLE_TRAINER_ENDPOINTS): they
//    get one id from trainer 0 (gen_nccl_id), join the TCP ring (and, all on
//    one host, shared memory over it), start from trainer 0's parameters,
//    all-reduce gradients every step, and agree on each epoch's steps (the
//    shortest shard's), saying how many examples they leave unused.
// The TRAINER role itself is cli/trainer_role.h. A pserver-mode TRAINER that
// fails tells the pservers why, and they stop the job at once
// (cli/trainer_failure.h).
// With --data_feed and --files (pserver mode), a TRAINER trains from MultiSlot
// files with AsyncExecutor threads instead (cli/async_trainer_role.h).
// With --report, a trainer also prints machine-readable lines on stdout for
// `oar launch`:
//   @oar progress trainer=0 epoch=1 epochs=2 step=5 steps=235 examples=640 loss=0.5123
//   @oar result trainer=0 examples=60000 seconds=20.1 loss=0.31 test_accuracy=0.87 test_loss=0.36
// (nccl2 mode adds collective=shm, tcp-ring or nccl: what it all-reduced through).
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/async_trainer_role.h"
#include "cli/command.h"
#include "cli/communicator_flags.h"
#include "cli/elastic_job.h"
#include "cli/elastic_leave.h"
#include "cli/elastic_ring.h"
#include "cli/metrics_export.h"
#include "cli/mode_flags.h"
#include "cli/model_build.h"
#include "cli/process_settings.h"
#include "cli/profile_export.h"
#include "cli/pserver_params.h"
#include "cli/role_env.h"
#include "cli/rpc_flags.h"
#include "cli/trainer_failure.h"
#include "cli/trainer_role.h"
#include "cli/trainers_flag.h"
#include "cli/transpile_cmd.h"
#include "common/api/io.h"
#include "common/base/flag_refusal.h"
#include "common/base/status.h"
#include "gflags/gflags.h"
#include "pserver/pserver_runtime.h"
#include "transpiler/distribute_transpiler.h"

DEFINE_string(role, "", "TRAINER or PSERVER (overrides PADDLE_TRAINING_ROLE)");
DECLARE_string(device);  // train_cmd.cc
DEFINE_int32(cpu_num, 0, "CPU places a trainer trains on (0: the CPU_NUM variable, else 1)");
DEFINE_bool(report, false,
            "print an @oar progress line per step on stdout instead of the progress bar (oar launch "
            "reads them); the closing @oar result line is printed either way");
DEFINE_string(loss_name, "", "with --program: the loss variable a trainer fetches");
DEFINE_string(feed_names, "", "with --program: the image and label variables a trainer feeds, \"x,label\"");
DEFINE_bool(dry_run, false, "print the role and cluster read from the environment and flags, then exit");
DEFINE_string(checkpoint_dir, "",
              "trainers: where trainer 0 asks the pservers to checkpoint (every --checkpoint_every steps), and a "
              "pserver that cannot be reached is waited for until --rpc_deadline (it may be restarting from its "
              "checkpoint) instead of failing after --rpc_retry_times; pservers: restore from DIR/pserver_<id> when a "
              "checkpoint is there (a restarted pserver rejoins the job)");
DEFINE_bool(fuse_all_reduce_ops, true,
            "nccl2 mode: pack gradients into buckets of --fuse_parameter_memory_size MB, one all-reduce each "
            "(Fluid's BuildStrategy.fuse_all_reduce_ops)");
DEFINE_string(collective_transport, "auto",
              "nccl2 mode on CPUs, how the trainers all-reduce: auto (through shared memory when every trainer is on "
              "this host, else over the TCP ring), tcp (the ring), or shm (shared memory, else fail)");
DEFINE_validator(collective_transport, [](const char*, const std::string& v) {
  if (v == "auto" || v == "tcp" || v == "shm") return true;
  return oar::RefuseFlagValue("choose auto, tcp or shm");
});
DEFINE_double(fuse_parameter_memory_size, 16.0,
              "with --fuse_all_reduce_ops: the most gradient memory (MB) one all-reduce across trainers packs");
DEFINE_string(pserver_port_file, "", "pservers: write the bound port here once serving (useful with port 0)");
DEFINE_int32(checkpoint_every, 0, "with --checkpoint_dir: trainer 0 checkpoints the pservers every N steps (0: never)");
DECLARE_string(pservers);
DECLARE_int32(trainer_id);
DECLARE_string(current_endpoint);
DECLARE_string(trainer_endpoints);
DECLARE_string(mode);
DECLARE_string(params);

namespace oar::cli {
namespace {

absl::StatusOr<RoleEnv> RoleFromEnvAndFlags() {
  RoleOverrides o;
  if (FlagGiven("role")) o.role = FLAGS_role;
  if (FlagGiven("pservers")) o.pservers = FLAGS_pservers;
  if (FlagGiven("current_endpoint")) o.current_endpoint = FLAGS_current_endpoint;
  if (FlagGiven("trainer_endpoints")) o.trainer_endpoints = FLAGS_trainer_endpoints;
  if (FlagGiven("trainer_id")) o.trainer_id = FLAGS_trainer_id;
  if (FlagGiven("trainers")) o.trainers = TrainersFromFlag().max;
  return ResolveRole([](const char* n) { return std::getenv(n); }, o, FLAGS_mode == "nccl2");
}

absl::Status RunRole(const RoleEnv& env);

absl::Status Run() {
  OAR_ASSIGN_OR_RETURN(RoleEnv env, RoleFromEnvAndFlags());
  absl::Status s = RunRole(env);
  // A failed pserver-mode trainer stops the job now, with its reason.
  if (!s.ok() && !FLAGS_dry_run && FLAGS_mode != "nccl2") TellPserversThisTrainerFailed(env, s);
  return s;
}

absl::Status RunRole(const RoleEnv& env) {
  if (FLAGS_dry_run) {
    const bool trainer = env.role == RoleEnv::Role::kTrainer;
    std::printf("role=%s%s trainers=%d pservers=%s current_endpoint=%s trainer_endpoints=%s\n", env.RoleName().c_str(),
                trainer ? absl::StrCat(" trainer_id=", env.trainer_id).c_str() : "", env.trainers,
                absl::StrJoin(env.pservers, ",").c_str(), env.current_endpoint.c_str(),
                absl::StrJoin(env.trainer_endpoints, ",").c_str());
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(
      auto metrics_export,
      MetricsExport::FromFlags(env.role == RoleEnv::Role::kTrainer ? absl::StrCat("trainer ", env.trainer_id)
                                                                   : absl::StrCat("pserver ", env.current_endpoint)));
  OAR_ASSIGN_OR_RETURN(auto profile, ProfileExport::FromFlags(env.role == RoleEnv::Role::kTrainer
                                                                  ? absl::StrCat("trainer ", env.trainer_id)
                                                                  : absl::StrCat("pserver ", env.current_endpoint)));
  OAR_ASSIGN_OR_RETURN(DistributeTranspilerConfig config, TranspilerConfigFromFlags());
  const bool nccl2 = config.mode == "nccl2";
  std::unique_ptr<ModelPrograms> model;
  ProgramDesc main, startup;
  OAR_RETURN_IF_ERROR(ProgramsFromFlags(&main, &startup, &model));
  // MultiSlot files are read by AsyncExecutor threads for a model (CTR) or
  // an async program; a program in sync or nccl2 mode reads them, like
  // arrays, through the data layer (cli/data_flags.h).
  const bool from_files = FlagGiven("data_feed");
  const bool async_executor = from_files && (model != nullptr || !config.sync_mode);
  if (async_executor && nccl2) {
    return absl::InvalidArgumentError(
        "--data_feed with --model trains in pserver mode (AsyncExecutor threads); drop "
        "--mode nccl2, or give the program file (--program) to train it collectively");
  }
  if (async_executor && FLAGS_device != "cpu") {
    return absl::UnimplementedError("--data_feed trainers (AsyncExecutor threads) run on CPUs: drop --device gpu");
  }
  OAR_RETURN_IF_ERROR(RefuseFlagsTheModeIgnores({.nccl2 = nccl2,
                                                 .data_feed = from_files,
                                                 .async_executor = async_executor,
                                                 .gpu = FLAGS_device == "gpu",
                                                 .communicator = CommunicatorOptionsFromFlags(config).has_value(),
                                                 .geo = config.geo_sgd_mode}));
  TrainerIo io;
  if (env.role == RoleEnv::Role::kTrainer && !async_executor) {
    OAR_ASSIGN_OR_RETURN(io, IoFor(model.get(), main));
  }
  if (FlagGiven("test_data") && model != nullptr) {
    return absl::InvalidArgumentError(
        "--test_data applies to --program (a model is evaluated on Fashion-MNIST's "
        "test split)");
  }
  if (FlagGiven("params") && model != nullptr) {
    return absl::InvalidArgumentError("--params applies to --program (Paddle's saved values for a program file)");
  }
  if (ElasticRequested()) {
    if (nccl2) OAR_RETURN_IF_ERROR(CheckElasticRingFlags());
    if (config.sync_mode && async_executor) {
      return absl::UnimplementedError(
          "--elastic_server: AsyncExecutor trainers (--data_feed files) of an elastic job train async: add --async");
    }
  } else {
    OAR_RETURN_IF_ERROR(RefuseTrainerRange("oar run without --elastic_server"));
  }
  const ProgramDesc origin = main;  // --params loads with the program as saved
  DistributeTranspiler t(config);
  if (nccl2) {
    OAR_RETURN_IF_ERROR(t.transpile(env.trainer_id, &main, "", absl::StrJoin(env.trainer_endpoints, ","), true,
                                    &startup, env.current_endpoint));
  } else {
    OAR_RETURN_IF_ERROR(t.transpile(env.trainer_id, &main, absl::StrJoin(env.pservers, ","), env.trainers,
                                    config.sync_mode, &startup, env.current_endpoint));
  }
  // An elastic job's member from here on (the program is known to transpile).
  std::unique_ptr<ElasticJob> elastic;
  if (ElasticRequested()) {
    OAR_ASSIGN_OR_RETURN(elastic, JoinElasticJob(env));
    if (elastic->done) return absl::OkStatus();  // a trainer started after the job ended: said so
  }
  std::optional<LeaveOnSigterm> leave;  // a trainer asked to stop leaves the job at once
  if (elastic != nullptr && env.role == RoleEnv::Role::kTrainer) leave.emplace(elastic.get());
  if (env.role == RoleEnv::Role::kTrainer && async_executor) {
    return RunAsyncTrainerRole(env, t, model.get(), FLAGS_report, elastic.get());
  }
  if (env.role == RoleEnv::Role::kTrainer) {
    return RunTrainer(env, io, t, nccl2, origin, profile->profiler(), elastic.get());
  }
  OAR_ASSIGN_OR_RETURN(auto programs, t.get_pserver_programs(env.current_endpoint));
  std::fprintf(stderr, "pserver %s: %d trainer(s), %s\n", env.current_endpoint.c_str(), env.trainers,
               config.sync_mode ? "sync" : "async");
  PserverInit init;
  if (FlagGiven("params")) {
    init = [&](Executor& exe, Scope* scope) -> absl::Status {
      OAR_ASSIGN_OR_RETURN(int n,
                           LoadPserverParams(exe, FLAGS_params, origin, programs.first, t.split_params(), scope));
      std::fprintf(stderr, "pserver %s: %d variable(s) from %s\n", env.current_endpoint.c_str(), n,
                   FLAGS_params.c_str());
      return absl::OkStatus();
    };
  }
  PserverProcess();
  OAR_RETURN_IF_ERROR(
      RunPserver(programs.first, programs.second,
                 {.checkpoint_dir = FLAGS_checkpoint_dir,
                  .init = init,
                  .profiler = profile->profiler(),
                  .rpc = RpcOptionsFromFlags(),
                  .port_file = FLAGS_pserver_port_file,
                  .trainer_members = elastic == nullptr ? std::function<TrainerMembers()>()
                                                        : [j = elastic.get()] { return TrainersOf(*j); },
                  .agree_on_leave =
                      elastic != nullptr && config.sync_mode ? LeaveAgreement(elastic.get(), env) : AgreeOnLeave()}));
  return elastic == nullptr ? absl::OkStatus() : MarkElasticJobDone(*elastic);
}

}  // namespace

int RunRun(const std::vector<std::string>& args) {
  const int code = RunWithoutArgs("run", args, Run);
  return code != 0 && WasTakenOut() ? kExitTakenOut : code;
}

}  // namespace oar::cli
