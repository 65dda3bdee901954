#include "common/device/cuda_context.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/device/gpu_info.h"
#include "glog/logging.h"

namespace oar {

absl::Status CudaStatus(cudaError_t e, absl::string_view what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e)));
}

absl::Status CublasStatus(cublasStatus_t s, absl::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cublasGetStatusName(s), ": ", cublasGetStatusString(s)));
}

absl::Status CurandStatus(curandStatus_t s, absl::string_view what) {
  if (s == CURAND_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuRAND status ", static_cast<int>(s)));
}

absl::Status CudnnStatus(cudnnStatus_t s, absl::string_view what) {
  if (s == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudnnGetErrorString(s)));
}

void CudaContext::Activate() const {
  cudaError_t e = cudaSetDevice(device);
  CHECK_EQ(e, cudaSuccess) << "cudaSetDevice(" << device << "): " << cudaGetErrorString(e);
}

namespace {

absl::Status MakeContext(int device, CudaContext* c) {
  const std::string where = absl::StrCat("CUDAPlace(", device, ")");
  c->device = device;
  OAR_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), where + ": cudaSetDevice"));
  OAR_RETURN_IF_ERROR(
      CudaStatus(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), where + ": cudaStreamCreate"));
  OAR_RETURN_IF_ERROR(
      CudaStatus(cudaDeviceGetDefaultMemPool(&c->pool, device), where + ": cudaDeviceGetDefaultMemPool"));
  // Keep freed blocks in the pool: a training step frees and re-takes the
  // same sizes every step.
  uint64_t keep = UINT64_MAX;
  OAR_RETURN_IF_ERROR(CudaStatus(cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrReleaseThreshold, &keep),
                                 where + ": cudaMemPoolSetAttribute(ReleaseThreshold)"));
  OAR_RETURN_IF_ERROR(CublasStatus(cublasCreate(&c->cublas), where + ": cublasCreate"));
  OAR_RETURN_IF_ERROR(CublasStatus(cublasSetStream(c->cublas, c->stream), where + ": cublasSetStream"));
  c->allow_tf32 = GpuAllowTf32();
  OAR_RETURN_IF_ERROR(
      CublasStatus(cublasSetMathMode(c->cublas, c->allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                   where + ": cublasSetMathMode"));
  OAR_RETURN_IF_ERROR(CudnnStatus(cudnnCreate(&c->cudnn), where + ": cudnnCreate"));
  OAR_RETURN_IF_ERROR(CudnnStatus(cudnnSetStream(c->cudnn, c->stream), where + ": cudnnSetStream"));
  OAR_RETURN_IF_ERROR(CurandStatus(curandCreateGenerator(&c->curand, CURAND_RNG_PSEUDO_PHILOX4_32_10),
                                   where + ": curandCreateGenerator"));
  OAR_RETURN_IF_ERROR(CurandStatus(curandSetStream(c->curand, c->stream), where + ": curandSetStream"));
  for (int i = 0; i < 2; ++i) {
    OAR_RETURN_IF_ERROR(
        CudaStatus(cudaMallocHost(&c->staging[i], CudaContext::kStagingBytes), where + ": cudaMallocHost (staging)"));
    OAR_RETURN_IF_ERROR(
        CudaStatus(cudaEventCreateWithFlags(&c->staging_done[i], cudaEventDisableTiming), where + ": cudaEventCreate"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CudaContext*> GetCudaContext(int device) {
  static std::mutex mu;
  static auto* contexts = new std::vector<std::unique_ptr<CudaContext>>();  // never destroyed
  static auto* errors = new std::vector<absl::Status>();
  std::lock_guard<std::mutex> lock(mu);
  if (device >= 0 && static_cast<size_t>(device) < contexts->size() && (*contexts)[device] != nullptr) {
    return (*contexts)[device].get();
  }
  OAR_RETURN_IF_ERROR(RequireGpu(device));
  if (static_cast<size_t>(device) >= contexts->size()) {
    contexts->resize(device + 1);
    errors->resize(device + 1);
  }
  // A context that failed once fails the same way again (a half-made one is
  // not retried: its handles would leak and the error would change).
  if (!(*errors)[device].ok()) return (*errors)[device];
  auto c = std::make_unique<CudaContext>();
  absl::Status s = MakeContext(device, c.get());
  if (!s.ok()) {
    (*errors)[device] = s;
    return s;
  }
  (*contexts)[device] = std::move(c);
  return (*contexts)[device].get();
}

}  // namespace oar
