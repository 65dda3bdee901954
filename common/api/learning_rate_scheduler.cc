#include "common/api/learning_rate_scheduler.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/api/control_flow.h"
#include "common/api/layer_helper.h"
#include "common/api/layers.h"
#include "common/api/math_ops.h"

namespace oar {
namespace layers {
namespace {

constexpr char kCounter[] = "@LR_DECAY_COUNTER@";

// Fluid's _lr_schedule_guard.
struct LrGuard {
  RoleGuard role{default_main_program(), OpRole::kLRSched, {}};
};

// The float32 step counter: 0 at the first step (or `begin`).
Var StepCounter(int64_t begin = 0) { return cast(autoincreased_step_counter(kCounter, begin, 1), DataType::kFloat32); }

bool CheckPositive(int64_t v, const char* what) {
  if (v > 0) return true;
  default_main_program()->RecordError(absl::InvalidArgumentError(absl::StrCat(what, " must be positive, got ", v)));
  return false;
}

// step / decay_steps, floored with staircase.
Var DecayRatio(int64_t decay_steps, bool staircase) {
  Var div = math::Div(StepCounter(), static_cast<float>(decay_steps));
  return staircase ? floor(div) : div;
}

}  // namespace

Var exponential_decay(float learning_rate, int64_t decay_steps, float decay_rate, bool staircase) {
  if (!CheckPositive(decay_steps, "exponential_decay: decay_steps")) return Var();
  LrGuard g;
  return math::Mul(math::RPow(decay_rate, DecayRatio(decay_steps, staircase)), learning_rate);
}

Var natural_exp_decay(float learning_rate, int64_t decay_steps, float decay_rate, bool staircase) {
  if (!CheckPositive(decay_steps, "natural_exp_decay: decay_steps")) return Var();
  LrGuard g;
  return math::Mul(exp(math::Mul(DecayRatio(decay_steps, staircase), -1 * decay_rate)), learning_rate);
}

Var inverse_time_decay(float learning_rate, int64_t decay_steps, float decay_rate, bool staircase) {
  if (!CheckPositive(decay_steps, "inverse_time_decay: decay_steps")) return Var();
  LrGuard g;
  return math::RDiv(learning_rate, math::Add(math::Mul(DecayRatio(decay_steps, staircase), decay_rate), 1.0f));
}

Var polynomial_decay(float learning_rate, int64_t decay_steps, float end_learning_rate, float power, bool cycle) {
  if (!CheckPositive(decay_steps, "polynomial_decay: decay_steps")) return Var();
  LrGuard g;
  Var step = StepCounter();
  Var ratio;
  if (cycle) {
    // decay_steps · max(1, ceil(step / decay_steps)), Fluid's Switch on step == 0.
    Var div = ceil(math::Div(step, static_cast<float>(decay_steps)));
    Var zero = fill_constant({1}, DataType::kFloat32, 0.0f);
    Var one = fill_constant({1}, DataType::kFloat32, 1.0f);
    LayerHelper h("equal");
    Var is_zero = h.CreateTmp(DataType::kBool, true);
    h.AppendOp("equal", {{"X", {step}}, {"Y", {zero}}}, {{"Out", {is_zero}}});
    {
      Switch sw;
      auto c = sw.Case(is_zero);
      assign(one, div);
    }
    Var steps = math::Mul(div, static_cast<float>(decay_steps));
    ratio = elementwise_div(step, steps);
  } else {
    Var limit = fill_constant({1}, DataType::kFloat32, static_cast<float>(decay_steps));
    ratio = math::Div(elementwise_min(step, limit), static_cast<float>(decay_steps));
  }
  Var decayed = math::Mul(math::Pow(math::RSub(1.0f, ratio), power), learning_rate - end_learning_rate);
  return math::Add(decayed, end_learning_rate);
}

Var piecewise_decay(const std::vector<int64_t>& boundaries, const std::vector<float>& values) {
  if (values.size() != boundaries.size() + 1 || boundaries.empty()) {
    default_main_program()->RecordError(
        absl::InvalidArgumentError(absl::StrCat("piecewise_decay: needs one more value than boundaries (got ",
                                                values.size(), " and ", boundaries.size(), ")")));
    return Var();
  }
  LrGuard g;
  Var step = StepCounter();
  Var lr = create_global_var({1}, 0.0f, DataType::kFloat32, true, "learning_rate");
  Switch sw;
  for (size_t i = 0; i < boundaries.size(); ++i) {
    Var boundary = fill_constant({1}, DataType::kFloat32, static_cast<float>(boundaries[i]), true);
    Var value = fill_constant({1}, DataType::kFloat32, values[i]);
    auto c = sw.Case(less_than(step, boundary));
    assign(value, lr);
  }
  Var last = fill_constant({1}, DataType::kFloat32, values.back());
  {
    auto d = sw.Default();
    assign(last, lr);
  }
  return lr;
}

Var noam_decay(int64_t d_model, int64_t warmup_steps) {
  if (!CheckPositive(d_model, "noam_decay: d_model") || !CheckPositive(warmup_steps, "noam_decay: warmup_steps")) {
    return Var();
  }
  LrGuard g;
  Var step = StepCounter(1);
  Var a = math::Pow(step, -0.5f);
  Var b = math::Mul(step, static_cast<float>(std::pow(static_cast<double>(warmup_steps), -1.5)));
  return math::Mul(elementwise_min(a, b), static_cast<float>(std::pow(static_cast<double>(d_model), -0.5)));
}

Var cosine_decay(float learning_rate, int64_t step_each_epoch, int64_t epochs) {
  if (!CheckPositive(step_each_epoch, "cosine_decay: step_each_epoch") ||
      !CheckPositive(epochs, "cosine_decay: epochs")) {
    return Var();
  }
  LrGuard g;
  Var epoch = floor(math::Div(StepCounter(), static_cast<float>(step_each_epoch)));
  Var angle = math::Div(math::Mul(epoch, static_cast<float>(M_PI)), static_cast<float>(epochs));
  return math::Mul(math::Add(cos(angle), 1.0f), learning_rate * 0.5f);
}

Var linear_lr_warmup(const Var& learning_rate, int64_t warmup_steps, float start_lr, float end_lr) {
  if (!CheckPositive(warmup_steps, "linear_lr_warmup: warmup_steps") || !learning_rate.valid()) return Var();
  LrGuard g;
  Var lr = create_global_var({1}, 0.0f, DataType::kFloat32, true, "learning_rate_warmup");
  Var step = StepCounter();
  Switch sw;
  {
    auto c = sw.Case(math::Less(step, static_cast<float>(warmup_steps)));
    Var decayed = math::Add(math::Mul(math::Div(step, static_cast<float>(warmup_steps)), end_lr - start_lr), start_lr);
    assign(decayed, lr);
  }
  {
    auto d = sw.Default();
    assign(learning_rate, lr);
  }
  return lr;
}

Var linear_lr_warmup(float learning_rate, int64_t warmup_steps, float start_lr, float end_lr) {
  Var base;
  {
    LrGuard g;
    base = fill_constant({1}, DataType::kFloat32, learning_rate);
  }
  return linear_lr_warmup(base, warmup_steps, start_lr, end_lr);
}

}  // namespace layers
}  // namespace oar
