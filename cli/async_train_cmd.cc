// `oar async-train`: Fluid's AsyncExecutor from the command line — trains a
// program (--program/--startup) on MultiSlot files (--files, glob patterns)
// described by a DataFeedDesc text file (--data_feed) with N threads that
// update the parameters without locks; prints the fetched variables after
// every batch with --debug, and at the end their last values and a summary.
#include <glob.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/command.h"
#include "cli/transpile_cmd.h"
#include "common/executor.h"
#include "common/status.h"
#include "gflags/gflags.h"
#include "trainer/async_executor.h"

DEFINE_string(data_feed, "", "the DataFeedDesc text file (Fluid's data.proto) describing the files' slots");
DEFINE_string(files, "", "the training files: comma-separated paths or glob patterns ('dir/part-*')");
DEFINE_int32(threads, 1, "training threads (each reads whole files; at most one per file)");
DEFINE_string(fetch, "", "comma-separated variables to print (after every batch with --debug; at the end)");
DEFINE_bool(debug, false, "print the fetched variables after every batch");
DEFINE_bool(skip_bad_lines, false, "count and skip malformed lines instead of stopping at the first");
DECLARE_string(program);
DECLARE_string(startup);

namespace oar::cli {
namespace {

// Each pattern's matches in sorted order; a pattern that matches nothing is an error.
absl::StatusOr<std::vector<std::string>> ExpandFiles(const std::string& patterns) {
  std::vector<std::string> files;
  for (absl::string_view p : absl::StrSplit(patterns, ',', absl::SkipEmpty())) {
    const std::string pattern(p);
    glob_t g{};
    const int rc = glob(pattern.c_str(), GLOB_NOSORT | GLOB_BRACE, nullptr, &g);
    if (rc != 0) {
      globfree(&g);
      return absl::NotFoundError(absl::StrCat("--files: '", pattern, "' matches no file"));
    }
    std::vector<std::string> matched(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(matched.begin(), matched.end());
    files.insert(files.end(), matched.begin(), matched.end());
  }
  if (files.empty()) return absl::InvalidArgumentError("give the training files with --files");
  return files;
}

absl::Status AsyncTrain() {
  if (FLAGS_program.empty() || FLAGS_startup.empty()) {
    return absl::InvalidArgumentError("give the programs with --program main.pb --startup startup.pb");
  }
  if (FLAGS_data_feed.empty()) return absl::InvalidArgumentError("give the DataFeedDesc file with --data_feed");
  OAR_ASSIGN_OR_RETURN(ProgramDesc main, ReadProgram(FLAGS_program, "--program"));
  OAR_ASSIGN_OR_RETURN(ProgramDesc startup, ReadProgram(FLAGS_startup, "--startup"));
  OAR_ASSIGN_OR_RETURN(DataFeedDesc feed, DataFeedDesc::Load(FLAGS_data_feed));
  OAR_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandFiles(FLAGS_files));
  const std::vector<std::string> fetch = absl::StrSplit(FLAGS_fetch, ',', absl::SkipEmpty());
  Scope root;
  OAR_RETURN_IF_ERROR(Annotate(Executor().Run(startup, &root).status(), "the startup program"));
  AsyncExecutor async(&root);
  const auto start = std::chrono::steady_clock::now();
  OAR_ASSIGN_OR_RETURN(AsyncRunResult r, async.Run(main, feed, files, FLAGS_threads, fetch,
                                                   {.debug = FLAGS_debug, .skip_bad_lines = FLAGS_skip_bad_lines}));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("async-train: %lld instances in %lld batches from %zu file(s), %d thread(s), %.2f s: %.0f instances/s\n",
              static_cast<long long>(r.instances), static_cast<long long>(r.batches), files.size(), r.threads, s,
              r.instances / std::max(s, 1e-9));
  if (r.bad_lines > 0) {
    std::printf("  skipped %lld malformed line(s); the first: %s\n", static_cast<long long>(r.bad_lines),
                r.first_bad_line.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int RunAsyncTrain(const std::vector<std::string>& args) { return RunWithoutArgs("async-train", args, AsyncTrain); }

}  // namespace oar::cli
