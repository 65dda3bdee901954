// Learning-rate schedules, after fluid.layers.learning_rate_scheduler: each
// returns a float32 [1] variable recomputed every step from the persistable
// step counter "@LR_DECAY_COUNTER@" (an `increment` op prepended to the main
// program), with the ops Fluid emits, all with op_role LRSched (16). Pass the
// result to Optimizer::set_learning_rate.
//
//   Var lr = layers::exponential_decay(0.1f, 100, 0.5f, /*staircase=*/true);
//   optimizer::SGD sgd(0); sgd.set_learning_rate(lr); sgd.minimize(loss);
//
// Thread-safety: externally synchronized (appends to the thread's programs).
#pragma once

#include <vector>

#include "common/api/program.h"

namespace oar {
namespace layers {

// lr · rate^(step / decay_steps)   (the exponent floored with staircase)
Var exponential_decay(float learning_rate, int64_t decay_steps, float decay_rate, bool staircase = false);
// lr · exp(−rate · step / decay_steps)
Var natural_exp_decay(float learning_rate, int64_t decay_steps, float decay_rate, bool staircase = false);
// lr / (1 + rate · step / decay_steps)
Var inverse_time_decay(float learning_rate, int64_t decay_steps, float decay_rate, bool staircase = false);
// (lr − end) · (1 − min(step, decay_steps) / decay_steps)^power + end; with
// cycle, decay_steps grows by multiples of itself.
Var polynomial_decay(float learning_rate, int64_t decay_steps, float end_learning_rate = 0.0001f, float power = 1.0f,
                     bool cycle = false);
// values[i] while step < boundaries[i]; values.back() afterwards.
Var piecewise_decay(const std::vector<int64_t>& boundaries, const std::vector<float>& values);
// d_model^−0.5 · min(step^−0.5, step · warmup^−1.5), step counted from 1.
Var noam_decay(int64_t d_model, int64_t warmup_steps);
// lr · 0.5 · (cos(floor(step / step_each_epoch) · π / epochs) + 1)
Var cosine_decay(float learning_rate, int64_t step_each_epoch, int64_t epochs);
// start + (end − start) · step / warmup_steps for step < warmup_steps, then
// `learning_rate` (a variable, e.g. another schedule, or a constant).
Var linear_lr_warmup(const Var& learning_rate, int64_t warmup_steps, float start_lr, float end_lr);
Var linear_lr_warmup(float learning_rate, int64_t warmup_steps, float start_lr, float end_lr);

}  // namespace layers
}  // namespace oar
