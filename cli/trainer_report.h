// ReportTrainer: the last line a trainer of a job prints,
//   @oar result trainer=ID examples=N seconds=S loss=L unused=U [collective=B] [test_...]
// (what `oar launch`'s summary reads), with, from the trainer that
// evaluates the job, the test set's accuracy and loss (a model) or the
// program's loss and --fetch values over its test data.
//
// Thread-safety: the trainer's main thread, after its training.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/data_flags.h"
#include "cli/trainer_role.h"
#include "trainer/trainer_runtime.h"

namespace oar::cli {

struct TrainerTotals {
  int64_t examples = 0;
  double seconds = 0;
  double loss = 0;
  int64_t unused = 0;
  std::string collective;  // nccl2: the backend; empty: not said
};

absl::Status ReportTrainer(TrainerRuntime* rt, const TrainerIo& io, const ProgramDesc& origin, const DataConfig& data,
                           const std::vector<const VarDesc*>& vars, int trainer_id, const TrainerTotals& totals,
                           bool evaluates);

}  // namespace oar::cli
