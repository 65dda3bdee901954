// The per-GPU device context (CUDA builds only): one non-blocking stream on
// which every kernel, library call and copy for that GPU is ordered, the
// cuBLAS, cuDNN and cuRAND handles bound to it, the device's stream-ordered
// memory pool (cudaMallocAsync; its release threshold set so freed memory
// stays cached for the next step instead of going back to the driver), and
// two pinned staging buffers for host copies.
//
//   OAR_ASSIGN_OR_RETURN(CudaContext* c, GetCudaContext(place.device));
//   c->Activate();  // cudaSetDevice on the calling thread
//   MyKernel<<<grid, block, 0, c->stream>>>(...);
//
// Contexts are made on first use and live until the process exits (never
// destroyed: CUDA's own teardown at exit may already have run).
//
// Thread-safety: GetCudaContext is safe from any thread. A context's handles
// are used by the one thread that runs that place's ops (the executor of
// the place); the staging buffers are guarded by staging_mu.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <curand.h>

#include <cstddef>
#include <mutex>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace oar {

struct CudaContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  curandGenerator_t curand = nullptr;
  cudaMemPool_t pool = nullptr;
  // --gpu_allow_tf32 when the context was made: cuBLAS and cuDNN may use
  // TF32 tensor cores for float32 (off by default, so results match the CPU).
  bool allow_tf32 = false;

  // Double-buffered pinned staging for pageable host <-> device copies:
  // chunk i of a copy goes through buffer i % 2; staging_done[b] is
  // recorded after the DMA that reads or writes buffer b.
  static constexpr size_t kStagingBytes = size_t{4} << 20;
  std::mutex staging_mu;
  void* staging[2] = {nullptr, nullptr};
  cudaEvent_t staging_done[2] = {nullptr, nullptr};

  // Makes this context's GPU current on the calling thread.
  void Activate() const;
};

// The context of CUDA device `device`, made on first use. FailedPrecondition
// naming the device when it does not exist or a handle cannot be made.
absl::StatusOr<CudaContext*> GetCudaContext(int device);

// OK, or Internal "<what>: <CUDA's error string>".
absl::Status CudaStatus(cudaError_t e, absl::string_view what);
absl::Status CublasStatus(cublasStatus_t s, absl::string_view what);
absl::Status CurandStatus(curandStatus_t s, absl::string_view what);
absl::Status CudnnStatus(cudnnStatus_t s, absl::string_view what);

}  // namespace oar
