// Which GPUs this process may use, and how it computes on them. GpuCount()
// is what CUDA sees (after CUDA_VISIBLE_DEVICES); a list of ordinals
// (--selected_gpus, or the FLAGS_selected_gpus environment variable Fluid's
// launcher sets, which cli/ reads) narrows it. Every answer is a clear status on a host without a GPU, or in a
// build without CUDA, so callers can refuse with one line.
//
//   OAR_RETURN_IF_ERROR(RequireGpu(0));        // before touching CUDAPlace(0)
//   OAR_ASSIGN_OR_RETURN(std::vector<int> ids, ParseSelectedGpus("0,2", GpuCount()));
//
// Thread-safety: all functions are safe to call from any thread;
// SetGpuAllowTf32 is a process-wide setting, made at start-up.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace oar {

// True when this binary was built with CUDA (OAR_HAVE_CUDA).
bool BuiltWithCuda();
// The number of GPUs CUDA sees; 0 without CUDA, a driver or a device.
int GpuCount();
// Why no GPU is usable, for messages: "this oar was built without CUDA",
// "cudaGetDeviceCount: no CUDA-capable device is detected
// (CUDA_VISIBLE_DEVICES unset)". Empty when GpuCount() > 0.
std::string NoGpuReason();
// OK when CUDA device `device` exists; otherwise FailedPrecondition "no GPU
// is visible to this process (...)" or "CUDAPlace(3): only 2 GPUs are
// visible (...)".
absl::Status RequireGpu(int device);
// The GPU ordinals to use: those `spec` lists ("0,2") when set, else every
// one of the `visible`. InvalidArgument for an ordinal that is not a
// number, repeated or not visible; FailedPrecondition when there is no GPU.
absl::StatusOr<std::vector<int>> ParseSelectedGpus(const std::string& spec, int visible);

// Whether cuBLAS may use TF32 tensor cores for float32 products (faster on
// A100/H100; results then differ from the CPU's in the 4th significant
// digit). Off unless set; read when a device's context is made, so set it
// before the first GPU op (--gpu_allow_tf32, set by cli/ at start-up).
void SetGpuAllowTf32(bool allow);
bool GpuAllowTf32();

}  // namespace oar
