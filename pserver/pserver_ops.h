// The pserver's ops (listen_and_serv). Register them into the global
// registry with OpRegistry::ExtendGlobal(RegisterPserverOps) before running
// a pserver program.
//
// Thread-safety: call at start-up.
#pragma once

#include "common/framework/op_registry.h"
#include "pserver/parameter_server.h"

namespace oar {

void RegisterPserverOps(OpRegistry* r);

// The ParameterServer configuration a listen_and_serv op describes (its
// attributes, plus OAR_AUTH_TOKEN and the TLS flags); the transport is left
// for the caller. InvalidArgument for a malformed attribute.
absl::StatusOr<PserverConfig> ListenAndServConfig(const OpDesc& listen_and_serv);

}  // namespace oar
