// AsyncExecutor: Fluid's file-driven, multi-threaded trainer
// (`AsyncExecutor(place).run(program, data_feed, filelist, thread_num,
// fetch, debug)`). Each thread reads its own batches through a
// MultiSlotDataFeed (the threads share the file list: each file is read
// whole by one of them), feeds every used slot into the program's variable
// of the same name and runs every op of block 0 — not only those the
// fetch list needs. Parameters and other persistable variables live in the
// shared root scope and every thread updates them in place without locks
// (Hogwild, as Fluid does); each thread's temporaries and fed variables
// live in a child scope of its own. With `debug`, the fetched variables are
// printed after every batch; at the end, their last values.
//
//   Scope root;
//   Executor(CPUPlace()).Run(startup, &root);
//   AsyncExecutor async(&root);
//   OAR_ASSIGN_OR_RETURN(auto result, async.Run(main, feed, files, 4, {"loss"}));
//
// Checked before any thread starts: every used slot is a variable of block
// 0, every fetch target is one, thread_num >= 1 (more threads than files
// are reduced to the number of files, as Fluid does). The first error in any
// thread (a malformed line, a failing op) stops every thread after its
// current batch and is returned, naming the thread.
//
// With more than one thread, Run sets OpenBLAS to one thread (each
// AsyncExecutor thread is one computation, as Fluid sets it) and restores
// the count at the end.
//
// Thread-safety: one Run at a time per AsyncExecutor. A program with
// send/recv ops runs them through `env` from every thread.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/data_feed_desc.h"
#include "common/device/place.h"
#include "common/framework/program_desc.h"
#include "common/framework/run_env.h"
#include "common/framework/scope.h"
#include "common/framework/tensor.h"

namespace oar {

struct AsyncRunOptions {
  bool debug = false;           // print the fetched variables after every batch
  bool skip_bad_lines = false;  // count malformed lines instead of failing
  std::FILE* out = stdout;      // where the fetched variables are printed
  // Called after every batch of any thread, one call at a time, with the
  // batch's examples and the thread's fetched values (a step log, a
  // progress display). Runs under the executor's lock: keep it short.
  std::function<void(int64_t examples, const std::vector<Tensor>& fetched)> on_batch = nullptr;
  // Told how many threads run, before they start, and each time one ends
  // (done or failed): what a half-async communicator's barrier counts.
  std::function<void(int threads)> on_start = nullptr;
  std::function<void()> on_thread_done = nullptr;
};

struct AsyncRunResult {
  int64_t instances = 0, batches = 0, bad_lines = 0;
  std::string first_bad_line;
  int threads = 0;
  std::vector<Tensor> last;  // each fetch target's value after the last batch (deep copies)
};

class AsyncExecutor {
 public:
  explicit AsyncExecutor(Scope* root, Place place = CPUPlace(), const RunEnv* env = nullptr)
      : root_(root), place_(place), env_(env) {}

  absl::StatusOr<AsyncRunResult> Run(const ProgramDesc& program, const DataFeedDesc& feed,
                                     const std::vector<std::string>& filelist, int thread_num,
                                     const std::vector<std::string>& fetch, AsyncRunOptions options = {});

 private:
  Scope* root_;
  Place place_;
  const RunEnv* env_;
};

// "loss=0.6931 acc=[0.5 0.25 ...] (4)": a fetched variable per entry.
std::string FormatFetched(const std::vector<std::string>& names, const std::vector<Tensor>& values);

}  // namespace oar
