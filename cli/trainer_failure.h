// What a pserver-mode trainer does when it fails: it tells every pserver
// why (ABORT@RECV), so the pservers stop the job at once and the other
// trainers fail with this trainer's reason, instead of every process
// waiting out FLAGS_rpc_deadline for a trainer that will not come back
// (pserver/parameter_server_abort.cc). Best effort: one short try per
// pserver, side by side (a pserver may be what failed); a trainer killed
// outright says nothing, and the pservers' barrier timeout still names it.
//
// The ABORT goes with the incarnation of the trainer's own calls, so a
// pserver can refuse it from a process that a restarted one replaced; and a
// trainer that has said COMPLETE says nothing (the job goes on without it).
//
// Thread-safety: the Note functions from any thread; Tell blocks the calling
// thread for at most a few seconds (2 s per call, side by side, plus the
// client's slack).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "cli/role_env.h"

namespace oar::cli {

// The incarnation this process's trainer calls carry (drawn once).
uint64_t ThisTrainersIncarnation();
// The trainer has said COMPLETE to its pservers.
void NoteTrainerCompleted();

void TellPserversThisTrainerFailed(const RoleEnv& env, const absl::Status& why);

// The exit code of a trainer an elastic job's pservers took out (its lease
// ran out or was revoked while it was cut off, stopped or stuck): not a
// failure of the job, which goes on without it. `oar launch` counts such a
// process as one that left; Kubernetes restarts the pod, which joins anew.
inline constexpr int kExitTakenOut = 3;
// Whether TellPserversThisTrainerFailed found the failure to be that.
bool WasTakenOut();

}  // namespace oar::cli
