// cuBLAS is opened on its first call (common/device/cublas_loader_cuda.cc),
// not when an oar process starts: a pserver or CPU trainer of a CUDA build
// must not carry libcublasLt's ~150 MB of resident memory. Checked in this
// process (which has made no cuBLAS call before) and on the oar binary.
#include <fstream>
#include <sstream>
#include <string>

#include "common/config.h"
#include "gtest/gtest.h"
#include "tests/util/oar_process.h"

#if OAR_HAVE_CUDA
#include <cublas_v2.h>
#endif

namespace oar {
namespace {

std::string Maps() {
  std::ifstream in("/proc/self/maps");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CublasLoadingTest, TheLibraryIsOpenedByTheFirstCallAndItsFunctionsAnswer) {
#if !OAR_HAVE_CUDA
  GTEST_SKIP() << "not a CUDA build";
#else
  EXPECT_EQ(Maps().find("libcublas"), std::string::npos) << "cuBLAS was loaded before any call";
  // A call that needs no GPU, answered by the library itself.
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_NE(Maps().find("libcublas"), std::string::npos) << "the call did not go through the library";
#endif
}

// The oar binary does not name cuBLAS among the libraries it needs.
TEST(CublasLoadingTest, TheOarBinaryDoesNotLinkCublas) {
  Result r = RunCommand("ldd " + OarBinary());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("libcublas"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace oar
