// `oar train --program main.pb --startup startup.pb --feed_names VAR,...
// --loss_name LOSS [--fetch NAME,...] [--params PATH]` and the data flags
// (cli/data_flags.h): trains a program written elsewhere — by Fluid or
// paddle.static, saved with `program.desc.serialize_to_string()` —
// unmodified, in this process, on Fashion-MNIST or the user's own data (npy
// arrays, MultiSlot files). `--params` starts from persistables Paddle saved
// (`save_persistables`: a directory of per-variable files, or one combined
// file) instead of the startup program's values. The test data (Fashion-
// MNIST's t10k, --test_data, --test_files) is then run through the
// program's forward part (backward and optimizer pruned, is_test set),
// printing test_loss= and test_<name>= for each --fetch.
#include <cstdio>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/command.h"
#include "cli/data_flags.h"
#include "cli/loss_check.h"
#include "cli/model_build.h"
#include "cli/process_settings.h"
#include "cli/program_eval.h"
#include "cli/program_params.h"
#include "cli/progress_bar.h"
#include "common/api/io.h"
#include "common/base/status.h"
#include "common/data/feed_check.h"
#include "common/framework/executor.h"
#include "common/framework/program_check.h"
#include "common/framework/run_env.h"
#include "common/metrics/training_metrics.h"
#include "gflags/gflags.h"
#include "trainer/parallel_executor.h"
#include "trainer/places.h"

DEFINE_string(params, "",
              "with --program: start from persistables Paddle saved (a directory of per-variable files, "
              "or one combined file) instead of the startup program's values");
DECLARE_string(program);
DECLARE_string(startup);
DECLARE_string(loss_name);
DECLARE_string(feed_names);
DECLARE_string(fetch);
DECLARE_int32(epochs);
DECLARE_int32(batch_size);
DECLARE_int64(max_steps);
DECLARE_int32(places);
DECLARE_bool(reduce);
DECLARE_bool(fuse_elewise_add_act_ops);
DECLARE_string(step_log);

namespace oar::cli {
namespace {

absl::StatusOr<std::unique_ptr<ProgramDesc>> ReadProgram(const std::string& path, const char* flag) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat("give the ", flag, " program file"));
  OAR_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  auto p = ProgramDesc::Parse(bytes);
  if (!p.ok()) return Annotate(p.status(), path);
  OAR_RETURN_IF_ERROR(RefusalsError(FindRefusals(**p, OpRegistry::Global()), path));  // all at once
  return std::move(*p);
}

// Flags that choose what `oar train --model` builds mean nothing here.
absl::Status RefuseModelFlags() {
  for (const char* flag : {"model", "optimizer", "lr", "save", "resume", "constant_init"}) {
    gflags::CommandLineFlagInfo info;
    if (gflags::GetCommandLineFlagInfo(flag, &info) && !info.is_default) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " does not apply to --program (the program file ",
                                                     "holds its own network and optimizer)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TrainProgram(Profiler* profiler) {
  OAR_RETURN_IF_ERROR(RefuseModelFlags());
  if (FLAGS_epochs < 1) return absl::InvalidArgumentError("--epochs must be >= 1");
  OAR_ASSIGN_OR_RETURN(const DataConfig data, DataConfigFromFlags());
  OAR_ASSIGN_OR_RETURN(auto main, ReadProgram(FLAGS_program, "--program"));
  OAR_ASSIGN_OR_RETURN(auto startup, ReadProgram(FLAGS_startup, "--startup"));
  const std::vector<std::string> feeds = absl::StrSplit(FLAGS_feed_names, ',', absl::SkipEmpty());
  const std::vector<std::string> fetch = absl::StrSplit(FLAGS_fetch, ',', absl::SkipEmpty());
  if (FLAGS_loss_name.empty() || feeds.empty()) {
    return absl::InvalidArgumentError(
        "--program needs --loss_name LOSS and --feed_names VAR,... (the variables the "
        "data feeds; for Fashion-MNIST the image, then the label)");
  }
  std::vector<std::string> named = {FLAGS_loss_name};
  named.insert(named.end(), fetch.begin(), fetch.end());
  for (const std::string& n : named) {
    if (main->Block(0).FindVar(n) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(FLAGS_program, " has no variable '", n, "'"));
    }
  }
  std::vector<const VarDesc*> vars;
  for (const std::string& n : feeds) {
    OAR_ASSIGN_OR_RETURN(const VarDesc* v, FeedVar(*main, FLAGS_program, n));
    vars.push_back(v);
  }
  OAR_ASSIGN_OR_RETURN(const std::vector<Place> places, TrainPlacesFromFlags());
  OAR_RETURN_IF_ERROR(CheckPlacesFitBatch(static_cast<int64_t>(places.size()), FLAGS_batch_size,
                                          FLAGS_places == 0 ? "CPU_NUM" : absl::StrCat("--places ", FLAGS_places)));
  for (const char* flag : {"reduce", "fuse_elewise_add_act_ops"}) {
    if (places.size() == 1 && FlagGiven(flag)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag,
                                                     " shapes how several places train; with one place "
                                                     "it does nothing: add --places N, or drop it"));
    }
  }
  RunEnv env;                     // env.profiler is set for the training steps only
  const Place place = places[0];  // the startup program and the evaluation run there
  Executor exe(place, ExecutorOptions{.env = &env});
  Scope scope;
  OAR_RETURN_IF_ERROR(Annotate(exe.Run(*startup, &scope).status(), "startup program"));
  if (!FLAGS_params.empty()) {
    OAR_RETURN_IF_ERROR(LoadProgramParams(exe, &scope, FLAGS_params, *main));
  }
  std::vector<std::string> targets = {FLAGS_loss_name};
  targets.insert(targets.end(), fetch.begin(), fetch.end());
  const ProgramDesc test_program = PruneToTargets(*main, feeds, targets);

  std::unique_ptr<ParallelExecutor> pe;  // --places N: data parallel, each batch split across the places
  if (FLAGS_places != 1) {
    ComputeThreads(places.size());
    BuildStrategy build;
    build.fuse_elewise_add_act_ops = FLAGS_fuse_elewise_add_act_ops;
    if (FLAGS_reduce) build.reduce_strategy = BuildStrategy::ReduceStrategy::kReduce;
    OAR_ASSIGN_OR_RETURN(
        pe, ParallelExecutor::Create(places, FLAGS_loss_name, *main, &scope, build, {}, 1, 0, nullptr, &env));
    std::fprintf(stderr, "training on %zu %s places\n", pe->num_places(), place.is_gpu() ? "GPU" : "CPU");
  }
  DataConfig data_for_places = data;
  data_for_places.min_batch = static_cast<int64_t>(places.size());  // a batch is split across them
  OAR_ASSIGN_OR_RETURN(std::unique_ptr<FeedSource> train, MakeTrainSource(data_for_places, vars));
  OAR_ASSIGN_OR_RETURN(std::unique_ptr<FeedSource> test, MakeTestSource(data, vars, 500));
  std::fprintf(stderr, "oar train: %s (%zu ops) on %s, batch %d%s\n", FLAGS_program.c_str(), main->Block(0).OpSize(),
               train->Describe().c_str(), FLAGS_batch_size,
               FLAGS_params.empty() ? "" : (", from " + FLAGS_params).c_str());
  OAR_ASSIGN_OR_RETURN(StepLog step_log, StepLog::Open(FLAGS_step_log));
  env.profiler = profiler;
  double seconds = 0, last_loss = 0;
  int64_t examples = 0, steps = 0;
  metrics::StepRecorder recorder;
  FeedBatch batch;
  int64_t epoch_steps = train->batches_per_epoch();  // streamed files: known after the first epoch
  for (int epoch = 1; epoch <= FLAGS_epochs && !(FLAGS_max_steps > 0 && steps >= FLAGS_max_steps); ++epoch) {
    ProgressBar bar(stderr, absl::StrFormat("epoch %d/%d", epoch, FLAGS_epochs), epoch_steps);
    OAR_RETURN_IF_ERROR(train->StartEpoch(epoch - 1));
    const int64_t steps_before = steps;
    while (FLAGS_max_steps <= 0 || steps < FLAGS_max_steps) {
      OAR_ASSIGN_OR_RETURN(const bool more, train->Next(&batch));
      if (!more) break;
      recorder.Start();
      std::vector<Tensor> out;
      if (pe) {  // one loss per place: their mean
        OAR_ASSIGN_OR_RETURN(out, pe->Run({FLAGS_loss_name}, batch.feeds));
        last_loss = 0;
        for (int64_t i = 0; i < out[0].numel(); ++i) last_loss += out[0].data<float>()[i] / out[0].numel();
      } else {
        OAR_ASSIGN_OR_RETURN(out, exe.Run(*main, &scope, batch.feeds, {FLAGS_loss_name}));
        OAR_ASSIGN_OR_RETURN(last_loss, ScalarOf(out[0], FLAGS_loss_name));
      }
      recorder.Done(batch.examples);
      OAR_RETURN_IF_ERROR(CheckLossFinite(last_loss, steps + 1, epoch));
      bar.Step(batch.examples, last_loss);
      step_log.Add(last_loss);
      ++steps;
      examples += batch.examples;
    }
    bar.Finish();
    seconds += bar.seconds();
    if (epoch_steps <= 0 && (FLAGS_max_steps <= 0 || steps < FLAGS_max_steps)) epoch_steps = steps - steps_before;
  }
  env.profiler = nullptr;  // the profile covers the training steps
  std::printf("trained %s: %d epoch(s), %lld examples in %.1f s (%.0f examples/s), last batch loss %.9g\n",
              FLAGS_program.c_str(), FLAGS_epochs, static_cast<long long>(examples), seconds,
              examples / std::max(seconds, 1e-9), last_loss);
  if (test == nullptr) return absl::OkStatus();
  if (pe != nullptr) OAR_RETURN_IF_ERROR(pe->GatherToPlace0());  // the evaluation runs on place 0
  OAR_ASSIGN_OR_RETURN(const std::vector<double> values,
                       EvaluateProgram(exe, test_program, &scope, test.get(), targets));
  std::printf("%s\n", EvalLine(targets, values, '\n').c_str());
  return absl::OkStatus();
}

}  // namespace oar::cli
