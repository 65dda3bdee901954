// Fluid's learning-rate schedules, each with its closed form, and the check
// that runs one step by step against it: through the CPU Executor
// (learning_rate_scheduler_test.cc) and on a GPU (tests/gpu/).
//
// Thread-safety: test-only.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/api/layers.h"
#include "common/api/learning_rate_scheduler.h"
#include "common/api/unique_name.h"
#include "common/framework/executor.h"
#include "gtest/gtest.h"

namespace oar::testing {

struct Schedule {
  std::string name;
  std::function<Var()> build;
  std::function<double(int step)> expected;  // step counted from 0
};

inline std::vector<Schedule> Schedules() {
  return {
      {"exponential", [] { return layers::exponential_decay(0.1f, 3, 0.5f); },
       [](int s) { return 0.1 * std::pow(0.5, s / 3.0); }},
      {"exponential_staircase", [] { return layers::exponential_decay(0.1f, 3, 0.5f, true); },
       [](int s) { return 0.1 * std::pow(0.5, s / 3); }},
      {"natural_exp", [] { return layers::natural_exp_decay(0.1f, 2, 0.3f); },
       [](int s) { return 0.1 * std::exp(-0.3 * s / 2.0); }},
      {"inverse_time", [] { return layers::inverse_time_decay(0.1f, 2, 0.5f, true); },
       [](int s) { return 0.1 / (1 + 0.5 * (s / 2)); }},
      {"polynomial", [] { return layers::polynomial_decay(0.1f, 5, 0.01f, 2.0f); },
       [](int s) {
         double r = std::min(s, 5) / 5.0;
         return 0.09 * (1 - r) * (1 - r) + 0.01;
       }},
      {"polynomial_cycle", [] { return layers::polynomial_decay(0.1f, 4, 0.0f, 1.0f, true); },
       [](int s) {
         double steps = 4.0 * std::max(1.0, std::ceil(s / 4.0));
         return 0.1 * (1 - s / steps);
       }},
      {"piecewise",
       [] {
         return layers::piecewise_decay({3, 6}, {1.0f, 0.5f, 0.1f});
       },
       [](int s) { return s < 3 ? 1.0 : (s < 6 ? 0.5 : 0.1); }},
      {"noam", [] { return layers::noam_decay(64, 4); },
       [](int s) {
         double t = s + 1;
         return std::pow(64.0, -0.5) * std::min(std::pow(t, -0.5), t * std::pow(4.0, -1.5));
       }},
      {"cosine", [] { return layers::cosine_decay(0.2f, 2, 5); },
       [](int s) { return 0.2 * 0.5 * (std::cos(std::floor(s / 2.0) * M_PI / 5) + 1); }},
      {"linear_warmup",
       [] { return layers::linear_lr_warmup(layers::exponential_decay(0.5f, 100, 0.5f, true), 4, 0.0f, 0.5f); },
       [](int s) { return s < 4 ? 0.5 * s / 4.0 : 0.5; }},
  };
}

// Builds `s`'s program, runs it 10 steps on an Executor at `place` (with
// `env`, when given) and checks each step's rate against the closed form
// (1e-6: float32 arithmetic of a few terms, rates at most 1).
inline void ExpectFollowsFormula(const Schedule& s, const Place& place, const RunEnv* env = nullptr) {
  UniqueNameGuard names;
  Program main, startup;
  Var lr;
  {
    ProgramGuard g(&main, &startup);
    lr = s.build();
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  Executor exe(place, {.env = env});
  Scope scope;
  const auto started = exe.Run(startup.desc(), &scope);
  ASSERT_TRUE(started.ok()) << started.status();
  for (int step = 0; step < 10; ++step) {
    auto out = exe.Run(main.desc(), &scope, {}, {lr.name()});
    ASSERT_TRUE(out.ok()) << "step " << step << ": " << out.status();
    EXPECT_NEAR((*out)[0].data<float>()[0], s.expected(step), 1e-6) << "step " << step;
  }
}

}  // namespace oar::testing
