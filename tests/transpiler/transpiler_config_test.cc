#include "transpiler/transpiler_config.h"

#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(DistributeTranspilerConfigTest, FluidDefaultsAndRejections) {
  DistributeTranspilerConfig c;
  EXPECT_TRUE(c.slice_var_up);
  EXPECT_EQ(c.min_block_size, 8192);
  EXPECT_EQ(c.mode, "pserver");
  EXPECT_TRUE(c.Validate().ok());
  c.min_block_size = 100;
  EXPECT_NE(c.Validate().message().find("min_block_size must be at least 8192"), std::string::npos);
  c.min_block_size = 8192;
  c.mode = "ring";
  EXPECT_NE(c.Validate().message().find("\"ring\""), std::string::npos);
  c.mode = "nccl2";
  EXPECT_TRUE(c.Validate().ok());
  c.enable_dc_asgd = true;
  EXPECT_FALSE(c.Validate().ok());
}

TEST(DistributeTranspilerConfigTest, SplitMethodsAndDispatchers) {
  EXPECT_EQ(*ParseSplitMethod("hashname"), DistributeTranspilerConfig::SplitMethod::kHashName);
  EXPECT_EQ(*ParseSplitMethod("RoundRobin"), DistributeTranspilerConfig::SplitMethod::kRoundRobin);
  EXPECT_NE(ParseSplitMethod("random").status().message().find("use roundrobin or hashname"), std::string::npos);
  DistributeTranspilerConfig c;
  EXPECT_EQ(c.MakeDispatcher({"a:1", "b:2"})->Dispatch({"x", "y"}), (std::vector<std::string>{"a:1", "b:2"}));
}

}  // namespace
}  // namespace oar
