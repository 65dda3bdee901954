// Flags a job's mode never reads, refused rather than silently ignored:
// the pserver slicing flags in nccl2 mode, --collective_transport in pserver
// mode, the MultiSlot reader's flags without --data_feed, the GPU flags
// without --device gpu, the --communicator_* flags without a communicator,
// --geo_sgd_need_push_nums without --geo_sgd_mode. Each rule looks only at flags given on the command
// line or as FLAGS_<name> (FlagGiven), so defaults never trip it.
//
// Thread-safety: reads gflags; call from main()'s thread.
#pragma once

#include "absl/status/status.h"

namespace oar::cli {

struct JobMode {
  bool nccl2 = false;           // --mode nccl2
  bool data_feed = false;       // trainers read MultiSlot files (--data_feed)
  bool async_executor = false;  // ... with AsyncExecutor threads (a model's, or async)
  bool gpu = false;             // --device gpu
  bool communicator = true;     // async trainers with Fluid's communicator (--runtime_split_send_recv, --half_async)
  bool geo = true;              // --geo_sgd_mode
};

// InvalidArgument naming the first given flag that `mode` does not read
// and what it goes with.
absl::Status RefuseFlagsTheModeIgnores(const JobMode& mode);

}  // namespace oar::cli
