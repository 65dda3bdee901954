#include "common/metrics/training_metrics.h"

namespace oar::metrics {

StepRecorder::StepRecorder()
    : steps_(Default().AddCounter("oar_trainer_steps_total", "Training steps run")->With({})),
      examples_(Default().AddCounter("oar_trainer_examples_total", "Examples the training steps ran on")->With({})),
      duration_(Default()
                    .AddHistogram("oar_trainer_step_duration_seconds",
                                  "One training step, its sends, barriers and receives included")
                    ->With({})) {}

void StepRecorder::Done(int64_t examples) {
  duration_->Observe(absl::ToDoubleSeconds(absl::Now() - start_));
  steps_->Add();
  examples_->Add(static_cast<double>(examples));
}

}  // namespace oar::metrics
