// The end of `oar launch`: the summary (PrintLaunchSummary: wall time,
// examples/s across the trainers, last loss, test metrics) and each
// process's time split, read from the
// metrics file it wrote (--metrics_file, common/metrics): a trainer's step
// time into compute, send, barrier wait and receive (its RPC ops' wall
// time, oar_trainer_rpc_op_seconds_total, the rest compute); an nccl2
// trainer's beside the wall time of its all-reduces across trainers
// (oar_trainer_collective_seconds_total, which overlaps compute); a pserver's
// into optimize (its optimize blocks) and serving (time in its request
// handlers, summed over handler threads).
//
//   trainer 0: 1.23 s of steps = compute 0.80 s, send 0.10 s, barrier wait 0.25 s, receive 0.08 s
//   trainer 0: 1.23 s of steps, all-reduce across trainers 0.40 s (on its own thread, overlapping compute)
//   trainer 0: send 0.89 s, receive 0.34 s (its AsyncExecutor threads' RPC time)
//   pserver 0: optimize 0.05 s, serving 0.60 s (handler threads' time)
//
// Thread-safety: plain functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cli/launch_monitor.h"

namespace oar::cli {

struct LaunchShape {
  bool nccl2 = false;
  int pservers = 0, trainers = 0;
  const char* mode = "sync";  // sync, async or nccl2
  bool data_feed = false;     // trainers read MultiSlot files (AsyncExecutor threads)
};

// Prints the job's summary to stdout from the trainers' reports, ending
// with the test_loss= and test_accuracy= (or test_auc=) lines scripts read.
// `first_step_seconds` < 0: no trainer reported a step. `names` and
// `metrics_files` as for TimeSplitLines; `extra` lines (an elastic job's)
// go before the test metrics.
void PrintLaunchSummary(const LaunchShape& shape, const std::vector<TrainerReport>& reports, double first_step_seconds,
                        double wall, const std::vector<std::string>& names,
                        const std::vector<std::string>& metrics_files, const std::vector<std::string>& extra = {});

// The samples of a metrics file in Prometheus' text format ("name{labels}"
// -> value); empty when the file is missing or unreadable.
std::map<std::string, double> ReadMetricsFile(const std::string& path);

// One line per process, as above; `names` are the processes ("trainer.0",
// "pserver.1") and `files` their metrics files, in the same order. A
// process whose file is missing (it failed) gets "no metrics". An nccl2
// trainer alone (no all-reduce across trainers) shows 0 s of them; a
// trainer of AsyncExecutor threads (no steps timed) its threads' RPC time.
std::vector<std::string> TimeSplitLines(const LaunchShape& shape, const std::vector<std::string>& names,
                                        const std::vector<std::string>& files);

}  // namespace oar::cli
