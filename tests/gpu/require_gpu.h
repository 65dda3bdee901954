// REQUIRE_GPU(): the first line of every `gpu`-labelled test; on a host
// without a visible GPU the test skips, naming the reason (no driver, no
// device, CUDA_VISIBLE_DEVICES empty, a build without CUDA).
//
// Thread-safety: test-only.
#pragma once

#include "common/device/gpu_info.h"
#include "gtest/gtest.h"

#define REQUIRE_GPU()                                                               \
  do {                                                                              \
    if (::oar::GpuCount() == 0) GTEST_SKIP() << "no GPU: " << ::oar::NoGpuReason(); \
  } while (0)
