#include "cli/process_settings.h"

#include "common/base/blas.h"
#include "common/base/malloc_tuning.h"

namespace oar::cli {

void PserverProcess() {
  MapLargeAllocations();  // per-step gradient buffers go back to the system when freed
}

void TrainerProcess(size_t places) {
  KeepLargeAllocations();  // each step's fresh gradient buffers reuse the last step's memory
  ComputeThreads(places);
}

void ComputeThreads(size_t workers) {
  if (workers > 1) SetBlasThreads(1);
}

}  // namespace oar::cli
