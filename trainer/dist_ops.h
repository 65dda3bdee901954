// The trainer's distributed ops, with Fluid's slots and attributes:
//   send(X...)              attrs epmap, trainer_id: X[i] → epmap[i]; with
//                           send_varnames + sections (runtime split), rows
//                           of X[0] cut by sections go to epmap[i] as
//                           send_varnames[i]
//   recv() -> Out...        attrs epmap, recv_varnames (or varnames),
//                           trainer_id: Out[i] ← epmap[i] (remote name
//                           recv_varnames[i] when given); one Out and several
//                           recv_varnames (runtime split): the blocks stacked
//   send_barrier            attrs endpoints, trainer_id: BATCH_BARRIER to each
//   fetch_barrier           attrs endpoints, trainer_id: FETCH_BARRIER to each
//   split_byref(X) -> Out...  attr sections (rows per part): views, no copy
//   split_selected_rows(X) -> Out...  attr height_sections: a SelectedRows
//                           cut by row ranges, rows renumbered per part
//   checkpoint_notify       attrs epmap, dir, trainer_id: each pserver saves
// Calls go out concurrently through the RPC client of the executor's RunEnv
// (FailedPrecondition without one) and are all waited for; errors name the
// RPC, variable and endpoint. Register with
// OpRegistry::ExtendGlobal(RegisterDistOps).
//
// Thread-safety: call RegisterDistOps at start-up.
#pragma once

#include "common/framework/op_registry.h"

namespace oar {

void RegisterDistOps(OpRegistry* r);  // with RegisterSplitOps
// split_byref and split_selected_rows alone (split_ops.cc).
void RegisterSplitOps(OpRegistry* r);

}  // namespace oar
