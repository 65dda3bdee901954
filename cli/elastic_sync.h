// An elastic job's sync trainer (docs/elastic.md): how it joins the
// pservers' steps and how it takes a step while it has no data.
//
// Joining. JoinPserverSteps asks every pserver to hold the serve phase of
// its current (or next) step (JOIN_HOLD@RECV), then tells all of them the
// highest of those steps (JOIN@RECV): every pserver is then at or before
// that step's serve phase, so all count the trainer from the same step,
// whose parameters it pulls next (the startup program's recv ops). A
// pserver that has gone past it meanwhile (its hold ran out) or is still
// taking the id's earlier run out of the job refuses, and the handshake is
// tried again.
//
// Idle steps. A sync trainer waiting for a chunk (others hold the last
// ones, and one of them may die) still takes part in every step, or the
// others would wait for it: IdleStepProgram is the tail of its program
// from send_barrier on — the BATCH_BARRIER (with no gradient sent, which
// the pservers count as arrived but not contributing), the parameter pulls
// and fetch_barrier.
//
// Thread-safety: plain functions; the client is safe for concurrent use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/program_desc.h"
#include "common/rpc/rpc_client.h"

namespace oar::cli {

// The step this trainer counts from at every pserver.
absl::StatusOr<int64_t> JoinPserverSteps(rpc::RpcClient* client, const std::vector<std::string>& pservers,
                                         int trainer_id, const std::string& member);

// InvalidArgument when the program has no send_barrier (not a sync
// pserver-mode trainer program).
absl::StatusOr<ProgramDesc> IdleStepProgram(const ProgramDesc& trainer_program);

}  // namespace oar::cli
