// The trainer's distributed ops, with Fluid's slots and attributes:
//   send(X...)              attrs epmap, trainer_id, sync_mode: X[i] → epmap[i]
//   recv() -> Out...        attrs epmap, varnames, trainer_id: Out[i] ← epmap[i]
//                           (the remote name is varnames[i] when given)
//   send_barrier            attrs endpoints, trainer_id: BATCH_BARRIER to each
//   fetch_barrier           attrs endpoints, trainer_id: FETCH_BARRIER to each
//   split_byref(X) -> Out...  attr sections (rows per part): views, no copy
//   checkpoint_notify       attrs epmap, dir, trainer_id: each pserver saves
// Calls go out concurrently through RpcClient::Global() and are all waited
// for; errors name the RPC, variable and endpoint. Register with
// OpRegistry::ExtendGlobal(RegisterDistOps).
//
// Thread-safety: call RegisterDistOps at start-up.
#pragma once

#include "common/op_registry.h"

namespace oar {

void RegisterDistOps(OpRegistry* r);

}  // namespace oar
