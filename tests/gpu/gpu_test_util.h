// What the GPU kernel tests share: a skip on a host without a GPU, a run
// of the same ops on the CPU and on CUDAPlace(0) over copies of the same
// inputs, and a comparison of an output on both.
//
// Tolerance (ExpectClose's default): float32 on both sides, but the GPU
// sums in another order (tree reductions, cuBLAS's and cuDNN's blocking),
// so a sum of K terms may differ by about K·2⁻²⁴ relative to its
// magnitude; for the K ≤ 1000 of the cuBLAS and elementwise tests
// |gpu − cpu| ≤ 1e-5 + 1e-4·|cpu| holds with margin, and TF32 (10-bit
// mantissa, ~1e-3 relative) would fail it: those tests also prove TF32 is
// off. Tests with longer sums (cuDNN's) pass an atol that scales with K.
//
// Thread-safety: test-only.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/device/device_memory.h"
#include "common/device/gpu_info.h"
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"
#include "tests/gpu/require_gpu.h"

namespace oar::testing {

using Inputs = std::map<std::string, Tensor>;

// Runs `ops` on the CPU and on CUDAPlace(0) over copies of `inputs`; returns
// the status of the GPU run and fills both scopes.
inline absl::Status RunBoth(const std::vector<OpDesc>& ops, const Inputs& inputs, Scope* cpu, Scope* gpu) {
  for (const auto& [name, t] : inputs) {
    SetTensor(cpu, name, t);
    Tensor copy;
    copy.CopyFrom(t);
    SetTensor(gpu, name, copy);
  }
  absl::Status s = RunOpsOn(ops, cpu, CPUPlace());
  if (!s.ok()) return s;
  return RunOpsOn(ops, gpu, CUDAPlace(0));
}

// `name` of the GPU scope as a host tensor (it must live on CUDAPlace(0)).
inline Tensor GpuResult(const Scope& gpu, const std::string& name) {
  const Tensor& dev = GetTensor(gpu, name);
  EXPECT_TRUE(dev.place() == CUDAPlace(0)) << name << " is on " << dev.place().ToString();
  Tensor host;
  absl::Status s = dev.CopyTo(CPUPlace(), &host);
  EXPECT_TRUE(s.ok()) << name << ": " << s;
  return host;
}

template <typename T>
void ExpectClose(const Scope& cpu, const Scope& gpu, const std::string& name, double atol = 1e-5, double rtol = 1e-4) {
  const Tensor& want = GetTensor(cpu, name);
  Tensor got = GpuResult(gpu, name);
  ASSERT_EQ(want.dims(), got.dims()) << name;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double w = static_cast<double>(want.data<T>()[i]), g = static_cast<double>(got.data<T>()[i]);
    ASSERT_LE(std::abs(w - g), atol + rtol * std::abs(w)) << name << "[" << i << "]: cpu " << w << ", gpu " << g;
  }
}

inline void Check(const std::vector<OpDesc>& ops, const Inputs& inputs, const std::vector<std::string>& float_outs,
                  const std::vector<std::string>& int64_outs = {}, double atol = 1e-5) {
  Scope cpu, gpu;
  absl::Status s = RunBoth(ops, inputs, &cpu, &gpu);
  ASSERT_TRUE(s.ok()) << s;
  for (const auto& n : float_outs) ExpectClose<float>(cpu, gpu, n, atol);
  for (const auto& n : int64_outs) ExpectClose<int64_t>(cpu, gpu, n);
}

inline Tensor Labels(int64_t rows, int64_t classes, uint64_t seed) {
  Tensor r = RandomTensor<float>({rows, 1}, 0, static_cast<double>(classes), seed);
  std::vector<int64_t> v;
  for (int64_t i = 0; i < rows; ++i) v.push_back(static_cast<int64_t>(r.data<float>()[i]) % classes);
  return MakeTensor<int64_t>({rows, 1}, v);
}

}  // namespace oar::testing
