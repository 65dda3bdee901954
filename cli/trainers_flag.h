// --trainers: how many trainers a job has, "N", or for an elastic job the
// fewest it goes on with and the most it may have, "MIN:MAX" (the form of
// PaddlePaddle's elastic launch, `--np 2:4`, PADDLE_ELASTIC_NP). The most
// is the job's trainer slots (PADDLE_TRAINERS_NUM, trainer ids 0..MAX-1);
// with fewer than MIN members an elastic job waits up to --rpc_deadline,
// then stops with the reason (cli/elastic_job.h, pserver/trainer_activity.h).
//
// Thread-safety: plain functions; the flag is read on the main thread.
#pragma once

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace oar::cli {

struct TrainerRange {
  int min = 1, max = 1;
  bool range = false;  // written MIN:MAX
};

// "4" -> {4, 4}; "2:4" -> {2, 4, range}. `what` names the text in errors
// ("--trainers", "PADDLE_ELASTIC_NP").
absl::StatusOr<TrainerRange> ParseTrainerRange(absl::string_view text, absl::string_view what);

// --trainers as given (its default: 1).
TrainerRange TrainersFromFlag();

// Refuses --trainers MIN:MAX where `command` has no elastic job to use it in.
absl::Status RefuseTrainerRange(absl::string_view command);

}  // namespace oar::cli
