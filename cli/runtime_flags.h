// The flags that set the libraries' process-wide switches and choose the
// GPUs: --check_nan_inf, --gpu_allow_tf32 and --selected_gpus (each also
// read from Fluid's FLAGS_<name> environment variable, as every flag is).
// The libraries take these as calls (SetCheckNanInf, SetGpuAllowTf32) or
// arguments (ParseSelectedGpus), never by reading the flags.
//
//   ApplyRuntimeFlags();                       // main(), after parsing
//   OAR_ASSIGN_OR_RETURN(auto gpus, SelectedGpusFromFlags());
//
// Thread-safety: ApplyRuntimeFlags at start-up, before other threads run.
#pragma once

#include <vector>

#include "absl/status/statusor.h"

namespace oar::cli {

// Sets the process-wide switches from the flags.
void ApplyRuntimeFlags();
// The GPU ordinals --selected_gpus lists, else every visible GPU
// (ParseSelectedGpus).
absl::StatusOr<std::vector<int>> SelectedGpusFromFlags();

}  // namespace oar::cli
