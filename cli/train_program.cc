// `oar train --program main.pb --startup startup.pb --feed_names IMAGE,LABEL
// --loss_name LOSS [--fetch NAME,...] [--params PATH]`: trains a program
// written elsewhere — by Fluid or paddle.static, saved with
// `program.desc.serialize_to_string()` — unmodified, on Fashion-MNIST, in
// this process. `--params` starts from persistables Paddle saved
// (`save_persistables`: a directory of per-variable files, or one combined
// file) instead of the startup program's values. The test split is then
// run through the program's forward part (backward and optimizer pruned,
// is_test set), printing test_loss= and test_<name>= for each --fetch.
#include <cstdio>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/command.h"
#include "cli/model_build.h"
#include "cli/loss_check.h"
#include "cli/progress_bar.h"
#include "common/metrics/training_metrics.h"
#include "common/api/io.h"
#include "common/data/batcher.h"
#include "common/data/fashion_mnist.h"
#include "common/executor.h"
#include "common/run_env.h"
#include "common/program_check.h"
#include "common/status.h"
#include "gflags/gflags.h"

DEFINE_string(params, "", "with --program: start from persistables Paddle saved (a directory of per-variable files, "
                          "or one combined file) instead of the startup program's values");
DECLARE_string(program);
DECLARE_string(startup);
DECLARE_string(loss_name);
DECLARE_string(feed_names);
DECLARE_string(fetch);
DECLARE_string(data_dir);
DECLARE_int32(epochs);
DECLARE_int32(batch_size);
DECLARE_int64(limit);
DECLARE_int64(max_steps);
DECLARE_string(step_log);
DECLARE_int32(seed);

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
  for (const char* flag : {"model", "optimizer", "lr", "places", "save", "resume", "constant_init"}) {
    gflags::CommandLineFlagInfo info;
    if (gflags::GetCommandLineFlagInfo(flag, &info) && !info.is_default) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " does not apply to --program (the program file ",
                                                     "holds its own network and optimizer)"));
    }
  }
  return absl::OkStatus();
}

// The image batch [n, 784] in the shape the program's feed declares
// ([-1, 784], [-1, 1, 28, 28], ...), without copying.
absl::Status ShapeLikeVar(const VarDesc& var, Tensor* x) {
  DDim want;
  for (int64_t d : var.shape) want.push_back(d < 0 ? x->dims()[0] : d);
  if (want.numel() != x->numel()) {
    return absl::InvalidArgumentError(absl::StrCat("feed '", var.name, "' is declared ", DDim(var.shape).ToString(),
                                                   "; a Fashion-MNIST batch is ", x->dims().ToString()));
  }
  x->Resize(want);
  return absl::OkStatus();
}

// Every loaded persistable has the shape the program declares (load ops take
// whatever the file holds; parameters of another network fail here, named).
absl::Status CheckLoadedShapes(const ProgramDesc& main, const Scope& scope) {
  for (const std::string& name : PersistableVarNames(main)) {
    const VarDesc* var = main.Block(0).FindVar(name);
    const Variable* v = scope.FindVar(name);
    if (var == nullptr || v == nullptr || !v->IsType<Tensor>()) continue;
    const DDim want(var->shape), got = v->Get<Tensor>().dims();
    bool known = true;
    for (int64_t d : var->shape) known &= d >= 0;
    if (known && want != got && !(want.numel() == 1 && got.numel() == 1)) {
      return absl::InvalidArgumentError(absl::StrCat("--params ", FLAGS_params, ": '", name, "' is ", got.ToString(),
                                                     " there, but the program declares ", want.ToString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TrainProgram(Profiler* profiler) {
  OAR_RETURN_IF_ERROR(RefuseModelFlags());
  if (FLAGS_epochs < 1 || FLAGS_batch_size < 1) return absl::InvalidArgumentError("--epochs and --batch_size must be >= 1");
  OAR_ASSIGN_OR_RETURN(auto main, ReadProgram(FLAGS_program, "--program"));
  OAR_ASSIGN_OR_RETURN(auto startup, ReadProgram(FLAGS_startup, "--startup"));
  const std::vector<std::string> feeds = absl::StrSplit(FLAGS_feed_names, ',', absl::SkipEmpty());
  const std::vector<std::string> fetch = absl::StrSplit(FLAGS_fetch, ',', absl::SkipEmpty());
  if (FLAGS_loss_name.empty() || feeds.size() != 2) {
    return absl::InvalidArgumentError("--program needs --loss_name LOSS and --feed_names IMAGE,LABEL");
  }
  std::vector<std::string> named = {FLAGS_loss_name, feeds[0], feeds[1]};
  named.insert(named.end(), fetch.begin(), fetch.end());
  for (const std::string& n : named) {
    if (main->Block(0).FindVar(n) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(FLAGS_program, " has no variable '", n, "'"));
    }
  }
  RunEnv env;  // env.profiler is set for the training steps only
  OAR_ASSIGN_OR_RETURN(const Place place, TrainPlaceFromFlags());
  Executor exe(place, ExecutorOptions{.env = &env});
  Scope scope;
  OAR_RETURN_IF_ERROR(Annotate(exe.Run(*startup, &scope).status(), "startup program"));
  if (!FLAGS_params.empty()) {
    OAR_RETURN_IF_ERROR(Annotate(LoadPersistablesFrom(exe, &scope, FLAGS_params, *main), "--params " + FLAGS_params));
    OAR_RETURN_IF_ERROR(CheckLoadedShapes(*main, scope));
  }
  std::vector<std::string> targets = {FLAGS_loss_name};
  targets.insert(targets.end(), fetch.begin(), fetch.end());
  const ProgramDesc test_program = PruneToTargets(*main, feeds, targets);

  OAR_ASSIGN_OR_RETURN(Dataset train, LoadFashionMnist(FLAGS_data_dir, "train"));
  OAR_ASSIGN_OR_RETURN(Dataset test, LoadFashionMnist(FLAGS_data_dir, "t10k"));
  if (FLAGS_limit > 0 && FLAGS_limit < train.size()) {
    train.images = train.images.Slice(0, FLAGS_limit);
    train.labels = train.labels.Slice(0, FLAGS_limit);
  }
  std::fprintf(stderr, "oar train: %s (%zu ops), %lld training / %lld test examples, batch %d%s\n",
               FLAGS_program.c_str(), main->Block(0).OpSize(), static_cast<long long>(train.size()),
               static_cast<long long>(test.size()), FLAGS_batch_size,
               FLAGS_params.empty() ? "" : (", from " + FLAGS_params).c_str());
  const VarDesc& image = *main->Block(0).FindVar(feeds[0]);
  Batcher batches(train, FLAGS_batch_size, /*shuffle=*/true, static_cast<uint64_t>(FLAGS_seed));
  OAR_ASSIGN_OR_RETURN(StepLog step_log, StepLog::Open(FLAGS_step_log));
  Tensor x, y;
  env.profiler = profiler;
  double seconds = 0, last_loss = 0;
  int64_t examples = 0, steps = 0;
  metrics::StepRecorder recorder;
  for (int epoch = 1; epoch <= FLAGS_epochs && !(FLAGS_max_steps > 0 && steps >= FLAGS_max_steps); ++epoch) {
    ProgressBar bar(stderr, absl::StrFormat("epoch %d/%d", epoch, FLAGS_epochs), batches.num_batches());
    batches.Reset();
    while ((FLAGS_max_steps <= 0 || steps < FLAGS_max_steps) && batches.Next(&x, &y)) {
      OAR_RETURN_IF_ERROR(ShapeLikeVar(image, &x));
      recorder.Start();
      OAR_ASSIGN_OR_RETURN(auto out, exe.Run(*main, &scope, {{feeds[0], x}, {feeds[1], y}}, {FLAGS_loss_name}));
      recorder.Done(x.dims()[0]);
      last_loss = out[0].data<float>()[0];
      OAR_RETURN_IF_ERROR(CheckLossFinite(last_loss, steps + 1, epoch));
      bar.Step(x.dims()[0], last_loss);
      step_log.Add(last_loss);
      ++steps;
      examples += x.dims()[0];
    }
    bar.Finish();
    seconds += bar.seconds();
  }
  env.profiler = nullptr;  // the profile covers the training steps
  // The test split through the forward part, each target averaged over examples.
  std::vector<double> sums(targets.size(), 0.0);
  Batcher test_batches(test, 500, /*shuffle=*/false);
  while (test_batches.Next(&x, &y)) {
    OAR_RETURN_IF_ERROR(ShapeLikeVar(image, &x));
    OAR_ASSIGN_OR_RETURN(auto out, exe.Run(test_program, &scope, {{feeds[0], x}, {feeds[1], y}}, targets));
    for (size_t i = 0; i < targets.size(); ++i) {
      if (out[i].dtype() != DataType::kFloat32 || out[i].numel() != 1) {
        return absl::InvalidArgumentError(absl::StrCat("--fetch '", targets[i], "' is not a float32 scalar (",
                                                       out[i].dims().ToString(), ")"));
      }
      sums[i] += out[i].data<float>()[0] * x.dims()[0];
    }
  }
  std::printf("trained %s: %d epoch(s), %lld examples in %.1f s (%.0f examples/s), last batch loss %.4f\n",
              FLAGS_program.c_str(), FLAGS_epochs, static_cast<long long>(examples), seconds,
              examples / std::max(seconds, 1e-9), last_loss);
  std::printf("test_loss=%.4f\n", sums[0] / test.size());
  for (size_t i = 1; i < targets.size(); ++i) std::printf("test_%s=%.4f\n", targets[i].c_str(), sums[i] / test.size());
  return absl::OkStatus();
}

}  // namespace oar::cli
