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
// A pserver-mode TRAINER that fails tells the pservers why, and they stop
// the job at once (cli/trainer_failure.h).
// With --data_feed and --files (pserver mode), a TRAINER trains from MultiSlot
// files with AsyncExecutor threads instead (cli/async_trainer_role.h).
// With --report, a trainer also prints machine-readable lines on stdout for
// `oar launch`:
//   @oar progress trainer=0 epoch=1 epochs=2 step=5 steps=235 examples=640 loss=0.5123
//   @oar result trainer=0 examples=60000 seconds=20.1 loss=0.31 test_accuracy=0.87 test_loss=0.36
// (nccl2 mode adds collective=shm, tcp-ring or nccl: what it all-reduced through).
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/async_trainer_role.h"
#include "cli/command.h"
#include "cli/mode_flags.h"
#include "cli/metrics_export.h"
#include "cli/model_build.h"
#include "cli/profile_export.h"
#include "cli/loss_check.h"
#include "cli/progress_bar.h"
#include "cli/pserver_params.h"
#include "cli/role_env.h"
#include "cli/trainer_failure.h"
#include "cli/transpile_cmd.h"
#include "common/metrics/training_metrics.h"
#include "common/api/io.h"
#include "common/data/batcher.h"
#include "common/malloc_tuning.h"
#include "common/status.h"
#include "gflags/gflags.h"
#include "pserver/pserver_runtime.h"
#include "trainer/places.h"
#include "trainer/trainer_runtime.h"
#include "transpiler/distribute_transpiler.h"

DEFINE_string(role, "", "TRAINER or PSERVER (overrides PADDLE_TRAINING_ROLE)");
DECLARE_string(device);  // train_cmd.cc
DEFINE_int32(cpu_num, 0, "CPU places a trainer trains on (0: the CPU_NUM variable, else 1)");
DEFINE_bool(report, false, "print an @oar progress line per step on stdout instead of the progress bar (oar launch "
                           "reads them); the closing @oar result line is printed either way");
DEFINE_string(loss_name, "", "with --program: the loss variable a trainer fetches");
DEFINE_string(feed_names, "", "with --program: the image and label variables a trainer feeds, \"x,label\"");
DEFINE_bool(dry_run, false, "print the role and cluster read from the environment and flags, then exit");
DEFINE_string(checkpoint_dir, "",
              "trainers: where trainer 0 asks the pservers to checkpoint (every --checkpoint_every steps); pservers: "
              "restore from DIR/pserver_<id> when a checkpoint is there (a restarted pserver rejoins the job)");
DEFINE_bool(fuse_all_reduce_ops, true,
            "nccl2 mode: pack gradients into buckets of --fuse_parameter_memory_size MB, one all-reduce each "
            "(Fluid's BuildStrategy.fuse_all_reduce_ops)");
DEFINE_int32(checkpoint_every, 0, "with --checkpoint_dir: trainer 0 checkpoints the pservers every N steps (0: never)");
DECLARE_string(pservers);
DECLARE_int32(trainers);
DECLARE_int32(trainer_id);
DECLARE_string(current_endpoint);
DECLARE_string(trainer_endpoints);
DECLARE_string(mode);
DECLARE_int32(epochs);
DECLARE_int32(batch_size);
DECLARE_int32(seed);
DECLARE_string(data_dir);
DECLARE_int64(limit);
DECLARE_string(step_log);
DECLARE_int64(max_steps);
DECLARE_string(program);
DECLARE_string(params);
DECLARE_string(model);

namespace oar::cli {
namespace {

absl::StatusOr<RoleEnv> RoleFromEnvAndFlags() {
  RoleOverrides o;
  if (FlagGiven("role")) o.role = FLAGS_role;
  if (FlagGiven("pservers")) o.pservers = FLAGS_pservers;
  if (FlagGiven("current_endpoint")) o.current_endpoint = FLAGS_current_endpoint;
  if (FlagGiven("trainer_endpoints")) o.trainer_endpoints = FLAGS_trainer_endpoints;
  if (FlagGiven("trainer_id")) o.trainer_id = FLAGS_trainer_id;
  if (FlagGiven("trainers")) o.trainers = FLAGS_trainers;
  return ResolveRole([](const char* n) { return std::getenv(n); }, o, FLAGS_mode == "nccl2");
}

// What a trainer feeds and fetches: from the model, or, for program files,
// from --loss_name and --feed_names (and then nothing to evaluate with).
struct TrainerIo {
  std::string loss, image, label;
  std::vector<int64_t> image_shape;
  const ModelPrograms* model = nullptr;  // for the test-set evaluation
};

absl::StatusOr<TrainerIo> IoFor(const ModelPrograms* model, const ProgramDesc& main) {
  TrainerIo io;
  if (model != nullptr) {
    io = {model->vars.loss.name(), model->vars.feeds[0].name(), model->vars.feeds[1].name(),
          model->vars.feeds[0].shape(), model};
    return io;
  }
  const std::vector<std::string> feeds = absl::StrSplit(FLAGS_feed_names, ',', absl::SkipEmpty());
  if (FLAGS_loss_name.empty() || feeds.size() != 2) {
    return absl::InvalidArgumentError(
        "a TRAINER given --program needs --loss_name and --feed_names IMAGE,LABEL (the variables to fetch and feed)");
  }
  for (const auto& n : {FLAGS_loss_name, feeds[0], feeds[1]}) {
    if (main.Block(0).FindVar(n) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("--program has no variable '", n, "'"));
    }
  }
  io = {FLAGS_loss_name, feeds[0], feeds[1], main.Block(0).FindVar(feeds[0])->shape, nullptr};
  return io;
}

// A [batch, 784] image tensor in the feed's declared shape (no copy).
void ShapeLike(const std::vector<int64_t>& feed_shape, Tensor* t) {
  if (feed_shape.empty()) return;
  std::vector<int64_t> shape = feed_shape;
  shape[0] = t->dims()[0];
  DDim d(shape);
  if (d.numel() == t->numel()) t->Resize(d);
}

// `origin`: the untranspiled program, for --params in nccl2 mode (each
// trainer holds whole parameters; in pserver mode the pservers load them and
// the trainers' startup pulls them).
absl::Status RunTrainer(const RoleEnv& env, const TrainerIo& io, DistributeTranspiler& t, bool nccl2,
                        const ProgramDesc& origin, Profiler* profiler) {
  // The device first: a host without the GPU asked for hears so at once.
  OAR_ASSIGN_OR_RETURN(const Place place, TrainPlaceFromFlags());
  KeepLargeAllocations();  // each step's fresh gradient buffers reuse the last step's memory
  OAR_ASSIGN_OR_RETURN(ProgramDesc main, t.get_trainer_program(/*wait_port=*/true));
  OAR_ASSIGN_OR_RETURN(ProgramDesc startup, t.get_trainer_startup_program());
  TrainerRuntime::Options options;
  options.profiler = profiler;
  if (nccl2 && FlagGiven("params")) {
    options.after_startup = [&origin](Executor& exe, Scope* scope) -> absl::Status {
      return Annotate(LoadPersistablesFrom(exe, scope, FLAGS_params, origin), "--params " + FLAGS_params);
    };
  }
  options.loss = io.loss;
  options.pservers = env.pservers;
  options.sync_mode = t.config().sync_mode;
  options.nccl2 = nccl2;
  options.build.fuse_all_reduce_ops = FLAGS_fuse_all_reduce_ops;
  options.trainers = env.trainers;
  options.trainer_id = env.trainer_id;
  options.trainer_endpoints = env.trainer_endpoints;
  if (FLAGS_cpu_num < 0) return absl::InvalidArgumentError("--cpu_num must be 0 (the CPU_NUM variable) or positive");
  if (place.is_gpu()) {
    if (FLAGS_cpu_num > 1) return absl::InvalidArgumentError("--cpu_num counts CPU places; --device gpu trains on one GPU");
    options.places = {place};
  } else if (FLAGS_cpu_num > 1) {
    options.places = CpuPlaces(FLAGS_cpu_num);
  } else if (FLAGS_cpu_num == 0) {
    OAR_ASSIGN_OR_RETURN(options.places, CpuPlacesFromEnv());
  }
  // --batch_size is the global batch, as in `oar train`: each trainer takes
  // its 1/trainers of it, so a sync job makes the single process's steps.
  const int64_t batch = std::max<int64_t>(1, FLAGS_batch_size / env.trainers);
  OAR_RETURN_IF_ERROR(CheckPlacesFitBatch(static_cast<int64_t>(options.places.size()), batch,
                                          absl::StrCat(FLAGS_cpu_num == 0 ? "CPU_NUM" : "--cpu_num", " for trainer ",
                                                       env.trainer_id, " (batch ", batch, " of --batch_size ",
                                                       FLAGS_batch_size, " over ", env.trainers, " trainer(s))")));
  // The trainers split the data and the steps by these; nccl2 trainers also
  // scale the loss by every trainer's place count.
  options.settings = {{"batch_size", FLAGS_batch_size}, {"seed", FLAGS_seed}, {"limit", FLAGS_limit},
                      {"epochs", FLAGS_epochs}, {"max_steps", FLAGS_max_steps}};
  if (nccl2) options.settings.emplace_back("cpu_num", std::max<int64_t>(1, static_cast<int64_t>(options.places.size())));
  options.incarnation = ThisTrainersIncarnation();  // its ABORT, should it fail, comes from the same run
  OAR_ASSIGN_OR_RETURN(auto rt, TrainerRuntime::Create(std::move(main), startup, options));
  if (FLAGS_program.empty()) OAR_RETURN_IF_ERROR(RequireFashionMnistModel(FLAGS_model));
  OAR_ASSIGN_OR_RETURN(Dataset train, LoadFashionMnist(FLAGS_data_dir, "train"));
  if (FLAGS_limit > 0 && FLAGS_limit < train.size()) {
    train.images = train.images.Slice(0, FLAGS_limit);
    train.labels = train.labels.Slice(0, FLAGS_limit);
  }
  Batcher batches(train, batch, /*shuffle=*/true, static_cast<uint64_t>(FLAGS_seed), env.trainer_id, env.trainers);
  batches.set_min_batch(static_cast<int64_t>(rt->num_places()));  // a batch is split across them
  std::fprintf(stderr, "trainer %d/%d: %lld examples of %lld, batch %lld, on %zu place(s), %s %s\n", env.trainer_id,
               env.trainers, static_cast<long long>(batches.size()), static_cast<long long>(train.size()),
               static_cast<long long>(batch), rt->num_places(), nccl2 ? "nccl2 with trainers" : "pservers",
               absl::StrJoin(nccl2 ? env.trainer_endpoints : env.pservers, ",").c_str());
  if (batches.left_out() > 0) {
    std::fprintf(stderr, "trainer %d: each epoch leaves out its last %lld example(s): fewer than the %zu places a "
                 "batch is split across\n", env.trainer_id, static_cast<long long>(batches.left_out()),
                 rt->num_places());
  }
  OAR_ASSIGN_OR_RETURN(StepLog step_log, StepLog::Open(FLAGS_step_log));
  ProgramDesc notify;  // checkpoint_notify to every pserver, run by trainer 0
  if (env.trainer_id == 0 && !FLAGS_checkpoint_dir.empty() && FLAGS_checkpoint_every > 0) {
    OpDesc* op = notify.MutableBlock(0)->AppendOp();
    op->type = "checkpoint_notify";
    op->SetAttr("epmap", env.pservers);
    op->SetAttr("dir", FLAGS_checkpoint_dir);
    op->SetAttr("trainer_id", int32_t{0});
  }
  const auto start = std::chrono::steady_clock::now();
  int64_t steps = 0, examples = 0, unused = 0;
  metrics::StepRecorder recorder;
  double loss = 0;
  Tensor x, y;
  auto out_of_steps = [&] { return FLAGS_max_steps > 0 && steps >= FLAGS_max_steps; };
  for (int epoch = 1; epoch <= FLAGS_epochs && !out_of_steps(); ++epoch) {
    ProgressBar bar(stderr, absl::StrFormat("trainer %d epoch %d/%d", env.trainer_id, epoch, FLAGS_epochs),
                    batches.num_batches());
    batches.Reset();
    int64_t step_in_epoch = 0;
    // nccl2: every trainer takes the fewest steps any has this epoch.
    std::vector<int64_t> counts;
    OAR_ASSIGN_OR_RETURN(const int64_t agreed, rt->AgreeOnSteps(batches.num_batches(), &counts));
    if (agreed < batches.num_batches()) {
      const int64_t left = std::max<int64_t>(0, batches.size() - agreed * batch);
      unused += left;
      std::fprintf(stderr, "trainer %d: epoch %d stops at step %lld with the other trainers; %lld example(s) unused\n",
                   env.trainer_id, epoch, static_cast<long long>(agreed), static_cast<long long>(left));
    }
    while (!out_of_steps() && step_in_epoch < agreed && batches.Next(&x, &y)) {
      ShapeLike(io.image_shape, &x);
      recorder.Start();
      OAR_ASSIGN_OR_RETURN(float l, rt->Step({{io.image, x}, {io.label, y}}));
      OAR_RETURN_IF_ERROR(CheckLossFinite(l, steps + 1, epoch, absl::StrCat("trainer ", env.trainer_id, ": ")));
      recorder.Done(x.dims()[0]);
      loss = l;
      ++steps;
      ++step_in_epoch;
      examples += x.dims()[0];
      step_log.Add(loss);
      if (notify.Block(0).OpSize() > 0 && steps % FLAGS_checkpoint_every == 0) {
        OAR_RETURN_IF_ERROR(Annotate(rt->executor().Run(notify, rt->scope()).status(),
                                     absl::StrCat("checkpoint after step ", steps)));
      }
      if (FLAGS_report) {
        std::printf("@oar progress trainer=%d epoch=%d epochs=%d step=%lld steps=%lld examples=%lld loss=%.6f\n",
                    env.trainer_id, epoch, FLAGS_epochs, static_cast<long long>(step_in_epoch),
                    static_cast<long long>(batches.num_batches()), static_cast<long long>(examples), loss);
        std::fflush(stdout);
      } else {
        bar.Step(x.dims()[0], loss);
      }
    }
    if (!FLAGS_report) bar.Finish();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Done with the pservers: they stop waiting for this trainer.
  OAR_RETURN_IF_ERROR(Annotate(rt->Close(), "saying COMPLETE to the pservers"));
  NoteTrainerCompleted();  // a failure from here on (the evaluation) is this trainer's alone
  if (steps == 0) {  // else its report would read as a result: "loss 0"
    return absl::InvalidArgumentError(absl::StrCat(
        "trainer ", env.trainer_id, " made no training step: its share is ", batches.size(), " of ", train.size(),
        " example(s) (1/", env.trainers, ")",
        nccl2 ? ", and nccl2 trainers all take the fewest steps any of them can" : "",
        "; train on more examples (--limit) or with fewer trainers"));
  }
  std::string result = absl::StrFormat("@oar result trainer=%d examples=%lld seconds=%.3f loss=%.6f unused=%lld",
                                       env.trainer_id, static_cast<long long>(examples), seconds, loss,
                                       static_cast<long long>(unused));
  if (nccl2) absl::StrAppend(&result, " collective=", rt->collective_backend());
  if (env.trainer_id == 0 && io.model != nullptr) {
    OAR_ASSIGN_OR_RETURN(Dataset test, LoadFashionMnist(FLAGS_data_dir, "t10k"));
    OAR_ASSIGN_OR_RETURN(EvalResult eval, Evaluate(rt->executor(), *io.model, rt->scope(), test, 500));
    absl::StrAppendFormat(&result, " test_accuracy=%.4f test_loss=%.4f", eval.accuracy, eval.loss);
  }
  std::printf("%s\n", result.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
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
    std::printf("role=%s%s trainers=%d pservers=%s current_endpoint=%s trainer_endpoints=%s\n",
                env.RoleName().c_str(), trainer ? absl::StrCat(" trainer_id=", env.trainer_id).c_str() : "",
                env.trainers, absl::StrJoin(env.pservers, ",").c_str(), env.current_endpoint.c_str(),
                absl::StrJoin(env.trainer_endpoints, ",").c_str());
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(auto metrics_export,
                       MetricsExport::FromFlags(env.role == RoleEnv::Role::kTrainer
                                                    ? absl::StrCat("trainer ", env.trainer_id)
                                                    : absl::StrCat("pserver ", env.current_endpoint)));
  OAR_ASSIGN_OR_RETURN(auto profile, ProfileExport::FromFlags(env.role == RoleEnv::Role::kTrainer
                                                                 ? absl::StrCat("trainer ", env.trainer_id)
                                                                 : absl::StrCat("pserver ", env.current_endpoint)));
  OAR_ASSIGN_OR_RETURN(DistributeTranspilerConfig config, TranspilerConfigFromFlags());
  const bool nccl2 = config.mode == "nccl2";
  std::unique_ptr<ModelPrograms> model;
  ProgramDesc main, startup;
  OAR_RETURN_IF_ERROR(ProgramsFromFlags(&main, &startup, &model));
  // A trainer that reads MultiSlot files runs AsyncExecutor threads.
  const bool from_files = FlagGiven("data_feed");
  if (from_files && nccl2) return absl::InvalidArgumentError("--data_feed trains in pserver mode; drop --mode nccl2");
  if (from_files && FLAGS_device != "cpu") {
    return absl::UnimplementedError("--data_feed trainers (AsyncExecutor threads) run on CPUs: drop --device gpu");
  }
  OAR_RETURN_IF_ERROR(RefuseFlagsTheModeIgnores({.nccl2 = nccl2, .data_feed = from_files, .gpu = FLAGS_device == "gpu"}));
  TrainerIo io;
  if (env.role == RoleEnv::Role::kTrainer && !from_files) {
    OAR_ASSIGN_OR_RETURN(io, IoFor(model.get(), main));
  }
  if (FlagGiven("params") && from_files) {
    return absl::InvalidArgumentError("--params does not apply to --data_feed trainers yet");
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
  if (env.role == RoleEnv::Role::kTrainer && from_files) return RunAsyncTrainerRole(env, t, model.get(), FLAGS_report);
  if (env.role == RoleEnv::Role::kTrainer) return RunTrainer(env, io, t, nccl2, origin, profile->profiler());
  OAR_ASSIGN_OR_RETURN(auto programs, t.get_pserver_programs(env.current_endpoint));
  std::fprintf(stderr, "pserver %s: %d trainer(s), %s\n", env.current_endpoint.c_str(), env.trainers,
               config.sync_mode ? "sync" : "async");
  PserverInit init;
  if (FlagGiven("params")) {
    init = [&](Executor& exe, Scope* scope) -> absl::Status {
      OAR_ASSIGN_OR_RETURN(int n, LoadPserverParams(exe, FLAGS_params, origin, programs.first, t.split_params(), scope));
      std::fprintf(stderr, "pserver %s: %d variable(s) from %s\n", env.current_endpoint.c_str(), n,
                   FLAGS_params.c_str());
      return absl::OkStatus();
    };
  }
  return RunPserver(programs.first, programs.second, FLAGS_checkpoint_dir, init, profile->profiler());
}

}  // namespace

int RunRun(const std::vector<std::string>& args) { return RunWithoutArgs("run", args, Run); }

}  // namespace oar::cli
