// `oar train`: trains an example model in this process on its dataset, with
// a progress bar per epoch and a summary ending in `test_accuracy=...`; with
// --program, a program file instead (train_program.cc).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/command.h"
#include "cli/loss_check.h"
#include "cli/metrics_export.h"
#include "cli/mode_flags.h"
#include "cli/model_build.h"
#include "cli/process_settings.h"
#include "cli/profile_export.h"
#include "cli/progress_bar.h"
#include "cli/runtime_flags.h"
#include "common/api/io.h"
#include "common/base/flag_refusal.h"
#include "common/base/status.h"
#include "common/data/batcher.h"
#include "common/device/gpu_info.h"
#include "common/framework/executor.h"
#include "common/framework/run_env.h"
#include "common/metrics/training_metrics.h"
#include "gflags/gflags.h"
#include "trainer/parallel_executor.h"
#include "trainer/places.h"

DEFINE_string(model, "fashion_mlp", "model to train (see examples/)");
DEFINE_int32(epochs, 2, "passes over the training set");
DEFINE_int32(batch_size, 128, "examples per step");
DEFINE_double(lr, 0.001, "learning rate");
DEFINE_string(optimizer, "adam",
              "sgd, momentum, adam, lazy_adam (Adam with lazy_mode: a sparse gradient moves only its rows) or adagrad");
DEFINE_int32(seed, 1, "seed for initializers and shuffling (0: random)");
DEFINE_string(data_dir, "/usr/share/datasets/fashion-mnist", "directory with the IDX .gz files");
DEFINE_string(data, "fashion_mnist",
              "the training data: fashion_mnist (from --data_dir), or with --program your own "
              "arrays, npy:DIR (one <variable>.npy per feed variable, first axis = examples) or "
              "npy:FILE.npz; MultiSlot files go through --data_feed DESC --files GLOBS");
DEFINE_int64(limit, 0, "train on the first N examples only (0: all)");
DEFINE_validator(limit, [](const char*, int64_t v) {
  if (v >= 0) return true;
  return oar::RefuseFlagValue("give a number of examples, or 0 for all");
});
DEFINE_string(save, "", "write a checkpoint (parameters and optimizer state) to this directory after each epoch");
DEFINE_string(resume, "", "start from the checkpoint in this directory instead of fresh initial values");
DEFINE_int32(places, 1,
             "places to train on in parallel (ParallelExecutor): CPU places (0 reads CPU_NUM), or with "
             "--device gpu GPUs (0: every selected GPU)");
DEFINE_bool(fuse_elewise_add_act_ops, false, "with --places != 1: fuse elementwise_add + relu/sigmoid/tanh");
DEFINE_string(constant_init, "", "fill every randomly initialized parameter with this value instead (to compare runs)");
DEFINE_string(step_log, "", "append each step's loss to this file, one per line");
DEFINE_int64(max_steps, 0, "stop after this many steps in all (0: run every epoch to the end)");
DEFINE_validator(max_steps, [](const char*, int64_t v) {
  if (v >= 0) return true;
  return oar::RefuseFlagValue("give a number of steps, or 0 for no cap");
});
DECLARE_string(program);
DEFINE_string(device, "cpu",
              "cpu, or gpu: train on GPUs (the first --places of --selected_gpus, or of every "
              "visible GPU)");
DEFINE_bool(reduce, false,
            "with --places != 1: Reduce strategy (each gradient owned by one place) instead of AllReduce");

namespace oar::cli {

absl::StatusOr<std::unique_ptr<ModelPrograms>> BuildModelFromFlags() {
  BuildOptions o{FLAGS_model, FLAGS_optimizer,  static_cast<float>(FLAGS_lr),
                 FLAGS_seed,  FLAGS_batch_size, std::nullopt};
  if (!FLAGS_constant_init.empty()) {
    float v = 0;
    if (!absl::SimpleAtof(FLAGS_constant_init, &v)) {
      return absl::InvalidArgumentError("--constant_init='" + FLAGS_constant_init + "' is not a number");
    }
    o.constant_init = v;
  }
  return BuildModel(o);
}

absl::StatusOr<Place> TrainPlaceFromFlags() {
  if (FLAGS_device == "cpu") return CPUPlace();
  if (FLAGS_device != "gpu") {
    return absl::InvalidArgumentError(absl::StrCat("--device '", FLAGS_device, "': use cpu or gpu"));
  }
  auto gpus = SelectedGpusFromFlags();
  if (!gpus.ok()) return Annotate(gpus.status(), "--device gpu");
  return CUDAPlace(gpus->front());
}

absl::StatusOr<std::vector<Place>> TrainPlacesFromFlags() {
  if (FLAGS_places < 0) return absl::InvalidArgumentError("--places must be 0 (every place) or positive");
  OAR_ASSIGN_OR_RETURN(const Place first, TrainPlaceFromFlags());
  if (!first.is_gpu()) {
    if (FLAGS_places == 0) return CpuPlacesFromEnv();
    return CpuPlaces(FLAGS_places);
  }
  OAR_ASSIGN_OR_RETURN(std::vector<int> gpus, SelectedGpusFromFlags());
  if (FLAGS_places > static_cast<int>(gpus.size())) {
    return absl::InvalidArgumentError(absl::StrCat("--places ", FLAGS_places, " --device gpu: ", gpus.size(),
                                                   " GPU(s) selected (--selected_gpus, CUDA_VISIBLE_DEVICES)"));
  }
  if (FLAGS_places > 0) gpus.resize(static_cast<size_t>(FLAGS_places));
  std::vector<Place> places;
  for (int g : gpus) places.push_back(CUDAPlace(g));
  return places;
}

namespace {

// Ops of the training steps are timed into `profiler` (null: none).
absl::Status Train(Profiler* profiler) {
  if (FLAGS_epochs < 1) return absl::InvalidArgumentError("--epochs must be at least 1");
  if (FLAGS_batch_size < 1) return absl::InvalidArgumentError("--batch_size must be at least 1");
  OAR_RETURN_IF_ERROR(RequireFashionMnistModel(FLAGS_model));
  for (const char* flag : {"data_feed", "files", "test_files", "test_data", "dataset", "shuffle", "drop_last",
                           "prefetch", "skip_bad_lines", "feed_names", "loss_name", "fetch", "params"}) {
    if (FlagGiven(flag)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag,
                                                     " applies to --program (a program file and your "
                                                     "data); --model ",
                                                     FLAGS_model, " trains on Fashion-MNIST"));
    }
  }
  OAR_ASSIGN_OR_RETURN(const std::vector<Place> places, TrainPlacesFromFlags());  // before loading anything
  for (const char* flag : {"reduce", "fuse_elewise_add_act_ops"}) {
    if (places.size() == 1 && FlagGiven(flag)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag,
                                                     " shapes how several places train; with one place "
                                                     "it does nothing: add --places N, or drop it"));
    }
  }
  OAR_RETURN_IF_ERROR(RefuseFlagsTheModeIgnores(
      {.gpu = FLAGS_device == "gpu", .communicator = false, .geo = false}));  // --selected_gpus on a CPU
  if (!FLAGS_save.empty()) {  // a folder it cannot write is said now, not after the first epoch
    std::error_code ec;
    std::filesystem::create_directories(FLAGS_save, ec);
    if (ec || ::access(FLAGS_save.c_str(), W_OK) != 0) {
      return absl::PermissionDeniedError(
          absl::StrCat("--save ", FLAGS_save, ": cannot write there (", ec ? ec.message() : std::strerror(errno), ")"));
    }
  }
  OAR_RETURN_IF_ERROR(CheckPlacesFitBatch(static_cast<int64_t>(places.size()), FLAGS_batch_size,
                                          FLAGS_places == 0 ? "CPU_NUM" : absl::StrCat("--places ", FLAGS_places)));
  OAR_ASSIGN_OR_RETURN(auto programs, BuildModelFromFlags());
  OAR_ASSIGN_OR_RETURN(Dataset train, LoadFashionMnist(FLAGS_data_dir, "train"));
  OAR_ASSIGN_OR_RETURN(Dataset test, LoadFashionMnist(FLAGS_data_dir, "t10k"));
  if (FLAGS_limit > 0 && FLAGS_limit < train.size()) {
    train.images = train.images.Slice(0, FLAGS_limit);
    train.labels = train.labels.Slice(0, FLAGS_limit);
  }
  std::fprintf(stderr, "oar train: %s, %lld training / %lld test examples, %s lr=%g, batch %d\n", FLAGS_model.c_str(),
               static_cast<long long>(train.size()), static_cast<long long>(test.size()), FLAGS_optimizer.c_str(),
               FLAGS_lr, FLAGS_batch_size);

  const Place place = places[0];  // the startup program and the evaluation run there
  if (place.is_gpu() && FLAGS_places == 1) std::fprintf(stderr, "training on %s\n", place.ToString().c_str());
  RunEnv env;  // env.profiler is set for the training steps only
  Executor exe(place, ExecutorOptions{.env = &env});
  Scope scope;
  OAR_RETURN_IF_ERROR(Annotate(exe.Run(programs->startup.desc(), &scope).status(), "startup program"));
  if (!FLAGS_resume.empty()) {
    std::vector<std::string> left_out;
    OAR_RETURN_IF_ERROR(
        Annotate(load_checkpoint(exe, &scope, FLAGS_resume, programs->main.desc(), &left_out), "--resume"));
    std::fprintf(stderr, "resumed from %s\n", FLAGS_resume.c_str());
    if (!left_out.empty()) {  // e.g. Adam's moments, resumed with --optimizer sgd
      std::fprintf(
          stderr,
          "note: --resume left out %zu variable(s) of the checkpoint that this program does not have "
          "(%s%s); was it saved with another --optimizer?\n",
          left_out.size(),
          absl::StrJoin(left_out.begin(),
                        left_out.begin() + std::min<std::ptrdiff_t>(3, static_cast<std::ptrdiff_t>(left_out.size())),
                        ", ")
              .c_str(),
          left_out.size() > 3 ? ", ..." : "");
    }
  }

  std::unique_ptr<ParallelExecutor> pe;
  if (FLAGS_places != 1) {
    ComputeThreads(places.size());
    BuildStrategy build;
    build.fuse_elewise_add_act_ops = FLAGS_fuse_elewise_add_act_ops;
    if (FLAGS_reduce) build.reduce_strategy = BuildStrategy::ReduceStrategy::kReduce;
    OAR_ASSIGN_OR_RETURN(pe, ParallelExecutor::Create(places, programs->vars.loss.name(), programs->main.desc(), &scope,
                                                      build, {}, 1, 0, nullptr, &env));
    std::string names;
    for (const Place& p : places) absl::StrAppend(&names, names.empty() ? " (" : ", ", p.ToString());
    std::fprintf(stderr, "training on %zu %s places%s\n", pe->num_places(), place.is_gpu() ? "GPU" : "CPU",
                 place.is_gpu() ? (names + ")").c_str() : "");
  }
  const auto& feeds = programs->vars.feeds;
  Batcher batches(train, FLAGS_batch_size, /*shuffle=*/true, static_cast<uint64_t>(FLAGS_seed));
  batches.set_min_batch(static_cast<int64_t>(places.size()));  // a batch is split across them
  if (batches.left_out() > 0) {
    std::fprintf(stderr,
                 "oar train: each epoch leaves out its last %lld example(s): fewer than the %zu places a "
                 "batch is split across\n",
                 static_cast<long long>(batches.left_out()), places.size());
  }
  Tensor x, y;
  env.profiler = profiler;
  double total_seconds = 0, last_loss = 0;
  int64_t total_examples = 0, steps = 0;
  metrics::StepRecorder recorder;
  OAR_ASSIGN_OR_RETURN(StepLog step_log, StepLog::Open(FLAGS_step_log));
  for (int epoch = 1; epoch <= FLAGS_epochs && !(FLAGS_max_steps > 0 && steps >= FLAGS_max_steps); ++epoch) {
    ProgressBar bar(stderr, absl::StrFormat("epoch %d/%d", epoch, FLAGS_epochs), batches.num_batches());
    batches.Reset();
    while ((FLAGS_max_steps <= 0 || steps < FLAGS_max_steps) && batches.Next(&x, &y)) {
      ShapeLikeFeed(feeds[0], &x);
      const FeedMap batch = {{feeds[0].name(), x}, {feeds[1].name(), y}};
      std::vector<Tensor> out;
      recorder.Start();
      if (pe) {
        OAR_ASSIGN_OR_RETURN(out, pe->Run({programs->vars.loss.name()}, batch));
      } else {
        OAR_ASSIGN_OR_RETURN(out, exe.Run(programs->main.desc(), &scope, batch, {programs->vars.loss.name()}));
      }
      recorder.Done(x.dims()[0]);
      last_loss = 0;  // with several places: the mean of their losses
      for (int64_t i = 0; i < out[0].numel(); ++i) last_loss += out[0].data<float>()[i] / out[0].numel();
      OAR_RETURN_IF_ERROR(CheckLossFinite(last_loss, steps + 1, epoch));
      bar.Step(x.dims()[0], last_loss);
      step_log.Add(last_loss);
      ++steps;
      total_examples += x.dims()[0];
    }
    bar.Finish();
    std::fprintf(stderr, "epoch %d: %.1f s\n", epoch, bar.seconds());
    total_seconds += bar.seconds();
    if (!FLAGS_save.empty()) {
      if (pe != nullptr) OAR_RETURN_IF_ERROR(pe->GatherToPlace0());
      OAR_RETURN_IF_ERROR(Annotate(save_checkpoint(exe, &scope, FLAGS_save, programs->main.desc()), "--save"));
    }
  }
  env.profiler = nullptr;  // the profile covers the training steps
  OAR_ASSIGN_OR_RETURN(EvalResult eval, Evaluate(exe, *programs, &scope, test, 500));
  std::printf("trained %s: %d epoch%s, %lld examples in %.1f s (%.0f examples/s), last batch loss %.4f\n",
              FLAGS_model.c_str(), FLAGS_epochs, FLAGS_epochs == 1 ? "" : "s", static_cast<long long>(total_examples),
              total_seconds, total_examples / std::max(total_seconds, 1e-9), last_loss);
  std::printf("test_loss=%.4f\n", eval.loss);
  std::printf("test_accuracy=%.4f\n", eval.accuracy);
  return absl::OkStatus();
}

}  // namespace

absl::Status TrainProgram(Profiler* profiler);  // train_program.cc

int RunTrain(const std::vector<std::string>& args) {
  if (!args.empty()) return Fail("train takes no positional arguments (got '" + args[0] + "')");
  auto metrics_export = MetricsExport::FromFlags("oar train");
  if (!metrics_export.ok()) return Fail(std::string(metrics_export.status().message()));
  auto profile = ProfileExport::FromFlags("oar train");
  if (!profile.ok()) return Fail(std::string(profile.status().message()));
  Profiler* profiler = (*profile)->profiler();
  absl::Status s = FLAGS_program.empty() ? Train(profiler) : TrainProgram(profiler);
  return s.ok() ? 0 : Fail(std::string(s.message()));
}

}  // namespace oar::cli
