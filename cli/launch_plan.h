// LaunchPlan: what `oar launch`'s flags ask for, checked before anything
// starts: the mode, how many pservers and trainers (an elastic job's most),
// whether its trainers are AsyncExecutor threads of MultiSlot files, the
// place they train on and the GPUs each gets, an elastic job's chaos
// schedule; every combination the children would refuse is refused here
// once, saying what to change.
//
// Thread-safety: reads the flags; call from the main thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/elastic_launch.h"
#include "common/device/place.h"

namespace oar::cli {

struct LaunchPlan {
  bool nccl2 = false, elastic = false, async_executor = false;
  int pservers = 0, trainers = 0;
  std::vector<ChaosEvent> chaos;
  std::string batch_note;  // how --batch_size splits, when not evenly
  Place place;
  std::vector<int> gpus;      // --device gpu: the selected GPUs
  const char* mode = "sync";  // sync, async or nccl2, as the children read the flags
};

absl::StatusOr<LaunchPlan> PlanLaunch();

}  // namespace oar::cli
