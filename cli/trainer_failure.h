// What a pserver-mode trainer does when it fails: it tells every pserver
// why (ABORT@RECV), so the pservers stop the job at once and the other
// trainers fail with this trainer's reason, instead of every process
// waiting out FLAGS_rpc_deadline for a trainer that will not come back
// (pserver/parameter_server_abort.cc). Best effort: one short try per
// pserver, side by side (a pserver may be what failed); a trainer killed
// outright says nothing, and the pservers' barrier timeout still names it.
//
// Thread-safety: blocks the calling thread for at most about 2 s.
#pragma once

#include "absl/status/status.h"
#include "cli/role_env.h"

namespace oar::cli {

void TellPserversThisTrainerFailed(const RoleEnv& env, const absl::Status& why);

}  // namespace oar::cli
