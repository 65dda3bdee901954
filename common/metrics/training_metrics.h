// A trainer's step metrics (common/metrics), in metrics::Default():
//
//   oar_trainer_steps_total              training steps run
//   oar_trainer_examples_total           examples those steps trained on
//   oar_trainer_step_duration_seconds    one step: forward, backward, and in a
//                                        distributed job its sends, barriers and receives
//
// The training loops of `oar train` and `oar run` time each step:
//
//   StepRecorder rec;
//   rec.Start();
//   ... run the step ...
//   rec.Done(batch_examples);
//
// Thread-safety: one StepRecorder per training loop; the metrics it
// updates are safe for concurrent use.
#pragma once

#include <cstdint>

#include "absl/time/time.h"
#include "common/metrics/metrics.h"

namespace oar::metrics {

class StepRecorder {
 public:
  StepRecorder();
  void Start() { start_ = absl::Now(); }
  // Counts the step begun by the last Start and its examples.
  void Done(int64_t examples);

 private:
  Counter* steps_;
  Counter* examples_;
  Histogram* duration_;
  absl::Time start_ = absl::Now();
};

}  // namespace oar::metrics
