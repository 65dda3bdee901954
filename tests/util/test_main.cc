// main() of Oar's test binaries (instead of GoogleTest's): as `oar` does
// (cli/main.cc), OpenBLAS first gets the best kernels this CPU supports
// (common/base/blas_core.h). On a CPU that OpenBLAS 0.3.21 does not know
// (Emerald Rapids, model 207) it would otherwise run its SSE3 "Prescott"
// fallback, whose sums round differently: a test's numbers would not be the
// ones a user's `oar` computes (resnet18's Paddle fixture drifted 6e-4
// from Paddle's losses over 9 steps, against 2.5e-6 with SkylakeX kernels).
#include "common/base/blas_core.h"
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  oar::ReexecWithBestBlasCore(argv);  // first: it may restart the process
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
