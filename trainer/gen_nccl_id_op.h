// gen_nccl_id (Fluid's op, as DistributeTranspiler's nccl2 mode appends it
// to the startup program): gives every trainer the same NCCL unique id.
//   gen_nccl_id() -> NCCLID    attrs endpoint, endpoint_list, trainer_id
// Trainer 0 makes the id (ncclGetUniqueId when Oar is built with NCCL;
// otherwise 128 random bytes, which only the CPU collectives can use) and
// sends it, as an NCCL_ID message, to every endpoint in endpoint_list,
// waiting (bounded by the RPC client's deadline) until each listens. Every other
// trainer serves `endpoint` until the id arrives (bounded the same way),
// then stops serving. NCCLID holds the id as a uint8 tensor of 128 bytes.
//
// Thread-safety: register at start-up; the kernel is reentrant.
#pragma once

#include "common/framework/op_registry.h"

namespace oar {

inline constexpr int kNcclIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES

void RegisterGenNcclIdOp(OpRegistry* r);

}  // namespace oar
