// Each schedule, run step by step through the Executor, against its closed
// form; and the program layout Fluid gives them.
#include "common/api/learning_rate_scheduler.h"

#include <cmath>
#include <functional>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/executor.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

struct Schedule {
  std::string name;
  std::function<Var()> build;
  std::function<double(int step)> expected;  // step counted from 0
};

std::vector<Schedule> Schedules() {
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
       [](int s) { double r = std::min(s, 5) / 5.0; return 0.09 * (1 - r) * (1 - r) + 0.01; }},
      {"polynomial_cycle", [] { return layers::polynomial_decay(0.1f, 4, 0.0f, 1.0f, true); },
       [](int s) { double steps = 4.0 * std::max(1.0, std::ceil(s / 4.0)); return 0.1 * (1 - s / steps); }},
      {"piecewise", [] { return layers::piecewise_decay({3, 6}, {1.0f, 0.5f, 0.1f}); },
       [](int s) { return s < 3 ? 1.0 : (s < 6 ? 0.5 : 0.1); }},
      {"noam", [] { return layers::noam_decay(64, 4); },
       [](int s) { double t = s + 1; return std::pow(64.0, -0.5) * std::min(std::pow(t, -0.5), t * std::pow(4.0, -1.5)); }},
      {"cosine", [] { return layers::cosine_decay(0.2f, 2, 5); },
       [](int s) { return 0.2 * 0.5 * (std::cos(std::floor(s / 2.0) * M_PI / 5) + 1); }},
      {"linear_warmup", [] { return layers::linear_lr_warmup(layers::exponential_decay(0.5f, 100, 0.5f, true), 4, 0.0f, 0.5f); },
       [](int s) { return s < 4 ? 0.5 * s / 4.0 : 0.5; }},
  };
}

class ScheduleTest : public ::testing::TestWithParam<Schedule> {};

TEST_P(ScheduleTest, FollowsItsFormulaStepByStep) {
  UniqueNameGuard names;
  Program main, startup;
  Var lr;
  {
    ProgramGuard g(&main, &startup);
    lr = GetParam().build();
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  Executor exe;
  Scope scope;
  ASSERT_TRUE(exe.Run(startup.desc(), &scope).ok());
  for (int step = 0; step < 10; ++step) {
    auto out = exe.Run(main.desc(), &scope, {}, {lr.name()});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_NEAR((*out)[0].data<float>()[0], GetParam().expected(step), 1e-6) << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(All, ScheduleTest, ::testing::ValuesIn(Schedules()),
                         [](const ::testing::TestParamInfo<Schedule>& i) { return i.param.name; });

TEST(ScheduleLayoutTest, CounterIsPrependedAndOpsAreLRSched) {
  UniqueNameGuard names;
  Program main, startup;
  {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {2});
    Var loss = layers::mean(layers::fc(x, 1));
    optimizer::SGD sgd(0.0f);
    sgd.set_learning_rate(layers::piecewise_decay({10}, {0.1f, 0.01f}));
    sgd.minimize(loss);
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  const BlockDesc& b = main.desc().Block(0);
  EXPECT_EQ(b.Op(0).type, "increment");
  EXPECT_EQ(b.Op(0).Input("X"), std::vector<std::string>{"@LR_DECAY_COUNTER@"});
  EXPECT_EQ(b.Op(0).role(), 16);
  ASSERT_EQ(main.desc().NumBlocks(), 3u);  // one sub-block per case
  int conditional = 0;
  for (size_t i = 0; i < b.OpSize(); ++i) {
    if (b.Op(i).type == "conditional_block") {
      ++conditional;
      EXPECT_EQ(b.Op(i).role(), 16);
      EXPECT_TRUE(b.Op(i).GetAttr<bool>("is_scalar_condition"));
      EXPECT_EQ(b.Op(i).Output("Out"), std::vector<std::string>{"learning_rate"});
    }
    if (b.Op(i).type == "sgd") EXPECT_EQ(b.Op(i).Input("LearningRate"), std::vector<std::string>{"learning_rate"});
  }
  EXPECT_EQ(conditional, 2);
  EXPECT_EQ(main.desc().Block(1).Op(0).type, "assign");
  const BlockDesc& s = startup.desc().Block(0);
  bool counter_init = false;
  for (size_t i = 0; i < s.OpSize(); ++i) {
    if (s.Op(i).Output("Out") == std::vector<std::string>{"@LR_DECAY_COUNTER@"}) {
      counter_init = true;
      EXPECT_EQ(s.Op(i).GetAttr<int32_t>("dtype"), static_cast<int32_t>(DataType::kInt64));
      EXPECT_EQ(s.Op(i).GetAttr<float>("value"), -1.0f);
      EXPECT_TRUE(s.Op(i).GetAttr<bool>("force_cpu"));
    }
  }
  EXPECT_TRUE(counter_init);
  // The program with sub-blocks round-trips.
  auto parsed = ProgramDesc::Parse(main.desc().Serialize());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ((*parsed)->ToString(), main.desc().ToString());
}

TEST(ScheduleLayoutTest, BadArgumentsAreRecorded) {
  UniqueNameGuard names;
  Program main, startup;
  {
    ProgramGuard g(&main, &startup);
    layers::piecewise_decay({1, 2}, {0.1f});
  }
  EXPECT_NE(main.status().message().find("one more value than boundaries"), std::string::npos);
}

}  // namespace
}  // namespace oar
