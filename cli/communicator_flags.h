// Fluid's FLAGS_communicator_* (1.5–1.6 read them as gflags; 1.7+ took the
// same names from the environment), resolved once into the options of a
// trainer's Communicator; and whether a job's trainers use one: async
// pserver training of a program transpiled with runtime_split_send_recv or
// half_async, as Fluid's fleet starts it for its Async and HalfAsync
// strategies.
//
// Thread-safety: reads flags; call from main()'s thread.
#pragma once

#include <optional>

#include <vector>

#include "trainer/communicator.h"
#include "trainer/geo_communicator.h"
#include "transpiler/distribute_transpiler.h"

namespace oar::cli {

// The options the flags describe, with half_async from the config, when
// `config`'s trainers use a communicator; nullopt when they call the
// pservers from their ops (sync training; async without runtime split).
std::optional<CommunicatorOptions> CommunicatorOptionsFromFlags(const DistributeTranspilerConfig& config);

// GEO-SGD (geo_sgd_mode): every parameter the transpiler placed, as the
// trainer's GeoCommunicator exchanges it; empty in any other mode.
std::vector<GeoParam> GeoParamsOf(const DistributeTranspiler& t, int trainer_id);
GeoOptions GeoOptionsOf(const DistributeTranspilerConfig& config, int trainers);

}  // namespace oar::cli
