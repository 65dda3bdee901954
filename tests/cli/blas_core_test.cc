// The `oar` binary runs OpenBLAS's best kernels for the CPU it is on, and
// leaves a user's OPENBLAS_CORETYPE alone (common/base/blas_core.h).
#include "common/base/blas_core.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/util/oar_process.h"

namespace oar {
namespace {

// The kernels an `oar` process reports with GLOG_v=1; "" if none.
std::string KernelsOf(const std::string& env) {
  const Result r =
      RunCommand(env + " GLOG_v=1 " + OarBinary() + " inspect " + SourceDir() + "/tests/testdata/paddle/mlp/main.pb");
  const std::string key = "OpenBLAS kernels: ";
  const size_t at = r.out.find(key);
  if (r.code != 0 || at == std::string::npos) return "";
  const size_t end = r.out.find_first_of(" \n", at + key.size());
  return r.out.substr(at + key.size(), end - at - key.size());
}

TEST(BlasCoreTest, ClassesOrderTheKernelSets) {
  EXPECT_EQ(BlasCoreClass("SkylakeX"), 3);
  EXPECT_EQ(BlasCoreClass("sapphirerapids"), 3);
  EXPECT_EQ(BlasCoreClass("Haswell"), 2);
  EXPECT_EQ(BlasCoreClass("Zen"), 2);
  EXPECT_EQ(BlasCoreClass("Sandybridge"), 1);
  EXPECT_EQ(BlasCoreClass("Prescott"), 0);
  EXPECT_EQ(BlasCoreClass("no such core"), 0);
}

TEST(BlasCoreTest, OarRunsKernelsAsWideAsTheCpuHas) {
  const std::string kernels = KernelsOf("env -u OPENBLAS_CORETYPE");
  ASSERT_FALSE(kernels.empty()) << "oar inspect printed no 'OpenBLAS kernels:' line";
  EXPECT_GE(BlasCoreClass(kernels), BlasCoreClass(CpuBlasCore()))
      << "oar runs " << kernels << " kernels on a CPU that supports " << CpuBlasCore() << "'s";
}

TEST(BlasCoreTest, AUsersCoreTypeIsKept) { EXPECT_EQ(KernelsOf("OPENBLAS_CORETYPE=Prescott"), "Prescott"); }

}  // namespace
}  // namespace oar
