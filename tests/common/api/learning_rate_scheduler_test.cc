// Each schedule, run step by step through the Executor, against its closed
// form; and the program layout Fluid gives them.
#include "common/api/learning_rate_scheduler.h"

#include <cmath>
#include <functional>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/framework/executor.h"
#include "gtest/gtest.h"
#include "tests/common/api/lr_schedules.h"

namespace oar {
namespace {

using testing::Schedule;
using testing::Schedules;

class ScheduleTest : public ::testing::TestWithParam<Schedule> {};

TEST_P(ScheduleTest, FollowsItsFormulaStepByStep) { testing::ExpectFollowsFormula(GetParam(), CPUPlace()); }

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
