// The communicator a pserver job's trainers join for the data layer's
// global shuffle (InMemoryDataset.global_shuffle of MultiSlot files): nccl2
// trainers have one already; a pserver job's trainers join the same way,
// for the shuffle only — trainer 0 makes an id and sends it to the others
// (Fluid's gen_nccl_id over RPC), and they form the TCP ring (shared memory
// when all are on one host) among PADDLE_TRAINER_ENDPOINTS. The ring is
// dropped once the lines are exchanged.
//
// Thread-safety: blocks the calling thread; every trainer calls it at the
// same point.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "cli/role_env.h"
#include "common/framework/executor.h"
#include "trainer/collective/collective.h"

namespace oar::cli {

// `exe`: the trainer's executor, whose RunEnv reaches the RPC layer.
absl::StatusOr<std::unique_ptr<Collective>> JoinTrainersForShuffle(const RoleEnv& env, Executor& exe);

}  // namespace oar::cli
