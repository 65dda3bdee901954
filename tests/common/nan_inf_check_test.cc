// FLAGS_check_nan_inf: the first op that writes a NaN or Inf fails the run,
// naming the op (numbered as in the program), its output variable and slot,
// the counts and the first index; without the flag the same run goes
// through (the check costs nothing unless asked for).
#include "common/framework/nan_inf_check.h"

#include <cmath>
#include <limits>

#include "common/framework/executor.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

// h = scale(x, 1e30); y = relu(h)
ProgramDesc ScaleThenRelu() {
  ProgramDesc program;
  BlockDesc* b = program.MutableBlock(0);
  b->Var("x")->shape = {-1, 3};
  b->Var("h");
  b->Var("y");
  OpDesc* scale = b->AppendOp();
  scale->type = "scale";
  scale->SetInput("X", {"x"});
  scale->SetOutput("Out", {"h"});
  scale->SetAttr("scale", 1e30f);
  OpDesc* relu = b->AppendOp();
  relu->type = "relu";
  relu->SetInput("X", {"h"});
  relu->SetOutput("Out", {"y"});
  return program;
}

struct FlagOn {
  FlagOn() { SetCheckNanInf(true); }
  ~FlagOn() { SetCheckNanInf(false); }
};

TEST(NanInfCheckTest, TheFirstOpThatWritesAnInfIsNamedWithTheVariableAndWhere) {
  const ProgramDesc program = ScaleThenRelu();
  // 2e10 x 1e30 overflows float32: h[1][0] and h[1][2] are Inf.
  const FeedMap feed = {{"x", MakeTensor<float>({2, 3}, {1, 0.5f, 2, 2e10f, 1, -3e10f})}};
  Scope scope;
  Executor exe;
  ASSERT_TRUE(exe.Run(program, &scope, feed, {"y"}).ok()) << "without the flag nothing is checked";
  FlagOn on;
  absl::Status s = exe.Run(program, &scope, feed, {"y"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("block 0, op #0: FLAGS_check_nan_inf: op 'scale' wrote Inf to 'h' (Out): 0 NaN and 2 Inf "
                             "of its 6 values, the first at [1, 0]"),
            std::string::npos)
      << s;
  EXPECT_TRUE(exe.Run(program, &scope, {{"x", MakeTensor<float>({1, 3}, {1, 2, 3})}}, {"y"}).ok())
      << "finite values pass";
}

// A NaN in the data is caught where it enters: at its feed.
TEST(NanInfCheckTest, ANaNInTheDataIsToldAtItsFeed) {
  FlagOn on;
  const ProgramDesc program = ScaleThenRelu();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Scope scope;
  Executor exe;
  absl::Status s = exe.Run(program, &scope, {{"x", MakeTensor<float>({1, 3}, {1, 2, nan})}}, {"y"}).status();
  EXPECT_NE(s.message().find("block 0, the feed of 'x': FLAGS_check_nan_inf: op 'feed' wrote NaN to 'x' (Out): 1 NaN "
                             "and 0 Inf of its 3 values, the first at [0, 2]"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace oar
