// An elastic nccl2 job's commits on disk (--checkpoint_dir DIR): the rank 0
// of each ring writes every commit as DIR/step-<S> (Fluid's persistables
// with Oar's checkpoint manifest, common/api/io.h, plus a `position` file:
// "<step> <epoch> <offset>"), complete or absent (written under a temporary
// name, then renamed). It keeps the newest, and every commit a new ring
// restored from (marked by a `resumed` file: where the job's size changed,
// what a fresh job of the new size can restart from to check it). A job
// started on DIR restarts from its newest commit.
//
// Thread-safety: plain functions; one writer per directory (a ring's rank 0).
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/framework/executor.h"
#include "trainer/committed_state.h"

namespace oar::cli {

// Writes `scope`'s persistables of `program` and `pos` as DIR/step-<step>,
// then removes the older commits not marked resumed.
absl::Status WriteRingCommit(Executor& exe, Scope* scope, const ProgramDesc& program, const std::string& dir,
                             const TrainingPosition& pos);

// Marks DIR/step-<step> (when there) as a commit a ring restored from.
void MarkRingCommitResumed(const std::string& dir, int64_t step);

// Loads DIR's newest complete commit into `scope`: its position, or
// nullopt when DIR holds none.
absl::StatusOr<std::optional<TrainingPosition>> LoadNewestRingCommit(Executor& exe, Scope* scope,
                                                                     const ProgramDesc& program,
                                                                     const std::string& dir);

}  // namespace oar::cli
