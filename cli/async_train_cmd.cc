// `oar async-train`: Fluid's AsyncExecutor from the command line — trains a
// program (--program/--startup, or --model ctr_dnn with --optimizer/--lr)
// on MultiSlot files (--files, glob patterns) described by a DataFeedDesc
// text file (--data_feed) with N threads that update the parameters without
// locks; prints the fetched variables after every batch with --debug, and
// at the end their last values and a summary; --step_log writes every
// batch's loss (%.9g) and a progress display counts them. --params starts a
// program from Paddle's saved values. With --test_files it ends by
// evaluating: a model's exact test_auc=… (and test_loss=…), a program's
// test_loss= and test_<fetch>= (read through the data layer).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/async_train_util.h"
#include "cli/command.h"
#include "cli/model_build.h"
#include "cli/process_settings.h"
#include "cli/program_eval.h"
#include "cli/program_params.h"
#include "cli/progress_bar.h"
#include "cli/transpile_cmd.h"
#include "common/api/io.h"
#include "common/base/status.h"
#include "common/framework/executor.h"
#include "gflags/gflags.h"
#include "trainer/async_executor.h"

DEFINE_string(data_feed, "", "the DataFeedDesc text file (Fluid's data.proto) describing the files' slots");
DEFINE_string(files, "", "the training files: comma-separated paths or glob patterns ('dir/part-*')");
DEFINE_int32(threads, 1, "training threads (each reads whole files; at most one per file)");
DEFINE_string(fetch, "", "comma-separated variables to print (after every batch with --debug; at the end)");
DEFINE_bool(debug, false, "print the fetched variables after every batch");
DEFINE_bool(skip_bad_lines, false, "count and skip malformed lines instead of stopping at the first");
DEFINE_string(test_files, "",
              "files to evaluate on after training: a --model's prediction (test_auc=, test_loss=), "
              "or a --program's --loss_name and each --fetch (test_loss=, test_<name>=)");
DECLARE_string(program);
DECLARE_string(startup);
DECLARE_string(model);
DECLARE_string(params);
DECLARE_string(loss_name);
DECLARE_string(step_log);

namespace oar::cli {
namespace {

bool Given(const char* flag) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(flag, &info) && !info.is_default;
}

absl::Status AsyncTrain() {
  const bool model = Given("model");
  if (model == (!FLAGS_program.empty() || !FLAGS_startup.empty())) {
    return absl::InvalidArgumentError("give either --model NAME or --program main.pb --startup startup.pb");
  }
  if (!model && (FLAGS_program.empty() || FLAGS_startup.empty())) {
    return absl::InvalidArgumentError("give the programs with --program main.pb --startup startup.pb");
  }
  if (!model && (!FLAGS_test_files.empty() || !FLAGS_step_log.empty()) && FLAGS_loss_name.empty()) {
    return absl::InvalidArgumentError(
        "--test_files and --step_log with --program need --loss_name (the loss to "
        "log and evaluate)");
  }
  if (model && Given("params")) {
    return absl::InvalidArgumentError("--params applies to --program (Paddle's saved values for a program file)");
  }
  if (FLAGS_data_feed.empty()) return absl::InvalidArgumentError("give the DataFeedDesc file with --data_feed");
  std::unique_ptr<ModelPrograms> built;
  ProgramDesc main, startup;
  if (model) {
    OAR_ASSIGN_OR_RETURN(built, BuildModelFromFlags());
    main = built->main.desc();
    startup = built->startup.desc();
  } else {
    OAR_ASSIGN_OR_RETURN(main, ReadProgram(FLAGS_program, "--program"));
    OAR_ASSIGN_OR_RETURN(startup, ReadProgram(FLAGS_startup, "--startup"));
  }
  OAR_ASSIGN_OR_RETURN(DataFeedDesc feed, DataFeedDesc::Load(FLAGS_data_feed));
  OAR_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandFiles(FLAGS_files));
  const std::vector<std::string> fetch = absl::StrSplit(FLAGS_fetch, ',', absl::SkipEmpty());
  Scope root;
  Executor exe;
  OAR_RETURN_IF_ERROR(Annotate(exe.Run(startup, &root).status(), "the startup program"));
  if (Given("params")) OAR_RETURN_IF_ERROR(LoadProgramParams(exe, &root, FLAGS_params, main));
  // Every batch's loss, from whichever thread ran it: the step log (%.9g)
  // and the progress display.
  const std::string loss = model ? built->vars.loss.name() : FLAGS_loss_name;
  std::vector<std::string> run_fetch = fetch;
  size_t loss_at = std::find(run_fetch.begin(), run_fetch.end(), loss) - run_fetch.begin();
  if (!loss.empty() && loss_at == run_fetch.size()) run_fetch.push_back(loss);
  OAR_ASSIGN_OR_RETURN(StepLog step_log, StepLog::Open(FLAGS_step_log));
  ProgressBar bar(stderr, "async-train", /*total_steps=*/-1);  // files are streamed: the count is not known
  AsyncRunOptions options{.debug = FLAGS_debug, .skip_bad_lines = FLAGS_skip_bad_lines};
  if (!loss.empty()) {
    options.on_batch = [&](int64_t examples, const std::vector<Tensor>& fetched) {
      const Tensor& l = fetched[loss_at];
      const double v = l.numel() == 1 && l.dtype() == DataType::kFloat32 ? l.data<float>()[0] : 0.0;
      step_log.Add(v);
      bar.Step(examples, v);
    };
  }
  ComputeThreads(static_cast<size_t>(FLAGS_threads));
  AsyncExecutor async(&root);
  const auto start = std::chrono::steady_clock::now();
  OAR_ASSIGN_OR_RETURN(AsyncRunResult r, async.Run(main, feed, files, FLAGS_threads, run_fetch, options));
  if (!loss.empty()) bar.Finish();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("async-train: %lld instances in %lld batches from %zu file(s), %d thread(s), %.2f s: %.0f instances/s\n",
              static_cast<long long>(r.instances), static_cast<long long>(r.batches), files.size(), r.threads, s,
              r.instances / std::max(s, 1e-9));
  if (r.bad_lines > 0) {
    std::printf("  skipped %lld malformed line(s); the first: %s\n", static_cast<long long>(r.bad_lines),
                r.first_bad_line.c_str());
  }
  if (!FLAGS_test_files.empty() && model) {
    OAR_ASSIGN_OR_RETURN(TestMetrics m, TestOnFiles(exe, built->test.desc(), built->vars.prediction.name(), feed,
                                                    FLAGS_test_files, &root));
    std::printf("test_auc=%.4f\ntest_loss=%.4f\n", m.auc, m.loss);
  } else if (!FLAGS_test_files.empty()) {  // a program: its loss and each --fetch, averaged over the test files
    std::vector<std::string> targets = {loss};
    for (const std::string& f : fetch) {
      if (f != loss) targets.push_back(f);
    }
    OAR_ASSIGN_OR_RETURN(const std::vector<double> values,
                         EvaluateProgramOnFiles(exe, PruneToTargets(main, UsedSlotNames(feed), targets), main, &root,
                                                feed, FLAGS_test_files, targets));
    std::printf("%s\n", EvalLine(targets, values, '\n').c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int RunAsyncTrain(const std::vector<std::string>& args) { return RunWithoutArgs("async-train", args, AsyncTrain); }

}  // namespace oar::cli
