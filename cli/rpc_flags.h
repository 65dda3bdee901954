// The --rpc_* flags (and Fluid's FLAGS_rpc_* environment variables, which
// flag_parse.h applies before the command line) resolved into the
// RpcOptions a process builds its transport with. The one place that reads
// them: the libraries take RpcOptions (common/rpc/rpc_options.h).
//
//   auto transport = rpc::MakeTransport(cli::RpcOptionsFromFlags());
//
// Thread-safety: reads the flags; call after parsing, before other threads
// change them (none do).
#pragma once

#include "common/rpc/rpc_options.h"
#include "gflags/gflags_declare.h"

DECLARE_int32(rpc_deadline);
DECLARE_int32(rpc_retry_times);
DECLARE_string(rpc_transport);
DECLARE_int32(rpc_shm_spin_us);

namespace oar::cli {

// The flags' values, with OAR_AUTH_TOKEN from the environment.
rpc::RpcOptions RpcOptionsFromFlags();

}  // namespace oar::cli
