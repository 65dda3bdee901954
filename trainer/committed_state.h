// CommittedState: an elastic nccl2 trainer's last commit (Horovod's
// `state.commit()`), kept in memory: a copy of the persistable tensors
// (parameters, optimizer moments, learning-rate counters) and where the
// training stood (step, epoch, examples into the epoch). When the ring
// breaks, the survivors roll back to it; when a new ring forms, Agree
// gives every rank — joiners too — the newest commit any rank holds.
//
//   state.Commit(*rt->scope(), names, {.step = 40, .epoch = 1, .offset = 5120});
//   ...ring broke: OAR_RETURN_IF_ERROR(state.Restore(rt->scope()));
//   ...new ring:   OAR_ASSIGN_OR_RETURN(int root, state.Agree(ring, rt->scope(), names));
//
// Thread-safety: one thread (the trainer's), between steps.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/program_desc.h"
#include "common/framework/scope.h"
#include "trainer/collective/collective.h"

namespace oar {

struct TrainingPosition {
  int64_t step = 0;    // steps the job has taken
  int64_t epoch = 1;   // 1-based
  int64_t offset = 0;  // examples of the epoch's order trained
};

class CommittedState {
 public:
  // Copies `names` (initialized tensors of `scope`) and `pos`.
  absl::Status Commit(const Scope& scope, const std::vector<std::string>& names, const TrainingPosition& pos);
  // Puts the committed tensors back into `scope` (into their buffers).
  absl::Status Restore(Scope* scope) const;
  // Over a new ring: every rank restores its own commit, the rank holding
  // the newest (the most steps; the lowest such rank) broadcasts its
  // tensors, and every rank commits what it then holds. With no commit
  // anywhere (the job's start), rank 0's values at position zero. The root.
  absl::StatusOr<int> Agree(Collective* ring, Scope* scope, const std::vector<std::string>& names);

  bool has() const { return has_; }
  const TrainingPosition& position() const { return pos_; }

 private:
  std::map<std::string, Tensor> tensors_;
  TrainingPosition pos_;
  bool has_ = false;
};

// The persistable tensors of `program`'s block 0 that `scope` holds
// initialized: what a commit copies and a new ring broadcasts.
std::vector<std::string> PersistableTensors(const ProgramDesc& program, const Scope& scope);

}  // namespace oar
