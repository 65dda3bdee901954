// The pserver's ops (listen_and_serv). Register them into the global
// registry with OpRegistry::ExtendGlobal(RegisterPserverOps) before running
// a pserver program.
//
// Thread-safety: call at start-up.
#pragma once

#include "common/op_registry.h"

namespace oar {

void RegisterPserverOps(OpRegistry* r);

}  // namespace oar
