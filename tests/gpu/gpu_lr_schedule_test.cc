// Every learning-rate schedule run step by step by Executor(CUDAPlace(0))
// follows its closed form, as on the CPU (learning_rate_scheduler_test.cc):
// the counter, the schedule's arithmetic (floor, pow, exp, cos, min), and
// piecewise_decay's Switch (less_than, logical_not/and, conditional_block
// with its assign sub-blocks) all on the GPU. Needs a GPU: skips, naming
// the reason, on a host without one. Labelled `gpu`.
// Tolerance: lr_schedules.h's, as on the CPU.
#include "tests/common/api/lr_schedules.h"
#include "tests/gpu/require_gpu.h"

namespace oar {
namespace {

class GpuScheduleTest : public ::testing::TestWithParam<testing::Schedule> {};

TEST_P(GpuScheduleTest, FollowsItsFormulaStepByStepOnTheGpu) {
  REQUIRE_GPU();
  testing::ExpectFollowsFormula(GetParam(), CUDAPlace(0));
}

INSTANTIATE_TEST_SUITE_P(All, GpuScheduleTest, ::testing::ValuesIn(testing::Schedules()),
                         [](const ::testing::TestParamInfo<testing::Schedule>& i) { return i.param.name; });

}  // namespace
}  // namespace oar
