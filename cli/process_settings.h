// Process-wide settings, made by a role's start-up in cli/ and never by a
// library constructor: the library types (ParameterServer,
// ParallelExecutor, AsyncExecutor) leave the process as they found it, so
// a test or an embedding program that runs several of them in one process
// keeps its own settings.
//
//   PserverProcess();          // a pserver: large buffers go back to the system
//   TrainerProcess(places);    // a trainer: large buffers stay; BLAS as below
//   ComputeThreads(n);         // n threads computing at once: 1 BLAS thread each
//
// Thread-safety: call at start-up, before other threads run.
#pragma once

#include <cstddef>

namespace oar::cli {

// The malloc policy of a pserver (common/base/malloc_tuning.h).
void PserverProcess();
// The malloc policy of a trainer, and ComputeThreads(places).
void TrainerProcess(size_t places);
// `workers` threads (a ParallelExecutor's places, an AsyncExecutor's
// threads) each compute: more than one gets one BLAS thread each, as in
// Fluid, or their BLAS pools fight over the cores.
void ComputeThreads(size_t workers);

}  // namespace oar::cli
