// Every learning-rate schedule run step by step by Executor(CUDAPlace(0))
// follows its closed form, as on the CPU (learning_rate_scheduler_test.cc):
// the counter, the schedule's arithmetic (floor, pow, exp, cos, min), and
// piecewise_decay's Switch (less_than, logical_not/and, conditional_block
// with its assign sub-blocks) all on the GPU. Needs a GPU: skips, naming
// the reason, on a host without one. Labelled `gpu`.
//
// Tolerance: 1e-6 absolute on rates of at most 1 — float32 arithmetic of a
// few terms, as on the CPU.
#include "common/api/unique_name.h"
#include "common/executor.h"
#include "tests/common/api/lr_schedules.h"
#include "tests/gpu/require_gpu.h"

namespace oar {
namespace {

class GpuScheduleTest : public ::testing::TestWithParam<testing::Schedule> {};

TEST_P(GpuScheduleTest, FollowsItsFormulaStepByStepOnTheGpu) {
  REQUIRE_GPU();
  UniqueNameGuard names;
  Program main, startup;
  Var lr;
  {
    ProgramGuard g(&main, &startup);
    lr = GetParam().build();
  }
  ASSERT_TRUE(main.status().ok()) << main.status();
  Executor exe(CUDAPlace(0));
  Scope scope;
  ASSERT_TRUE(exe.Run(startup.desc(), &scope).ok());
  for (int step = 0; step < 10; ++step) {
    auto out = exe.Run(main.desc(), &scope, {}, {lr.name()});
    ASSERT_TRUE(out.ok()) << "step " << step << ": " << out.status();
    EXPECT_NEAR((*out)[0].data<float>()[0], GetParam().expected(step), 1e-6) << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(All, GpuScheduleTest, ::testing::ValuesIn(testing::Schedules()),
                         [](const ::testing::TestParamInfo<testing::Schedule>& i) { return i.param.name; });

}  // namespace
}  // namespace oar
