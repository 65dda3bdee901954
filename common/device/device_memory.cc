#include "common/device/device_memory.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/config.h"
#include "glog/logging.h"

#if OAR_HAVE_CUDA
#include "common/device/cuda_context.h"
#else
#include "common/device/gpu_info.h"
#endif

namespace oar {

#if OAR_HAVE_CUDA

namespace {

CudaContext* ContextOrDie(const Place& place) {
  auto c = GetCudaContext(place.device);
  if (!c.ok()) LOG(FATAL) << place.ToString() << ": " << c.status().message();
  (*c)->Activate();
  return *c;
}

// `s` with the place that failed in front.
absl::Status OnPlace(absl::Status s, const Place& place) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(place.ToString(), ": ", s.message()));
}

// Pageable host -> device through the staging buffers.
absl::Status StageToDevice(CudaContext* c, char* dst, const char* src, size_t n) {
  std::lock_guard<std::mutex> lock(c->staging_mu);
  const size_t chunk = CudaContext::kStagingBytes;
  for (size_t off = 0, i = 0; off < n; off += chunk, i ^= 1) {
    const size_t len = std::min(chunk, n - off);
    OAR_RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(c->staging_done[i]), "host->device copy: staging wait"));
    std::memcpy(c->staging[i], src + off, len);
    OAR_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(dst + off, c->staging[i], len, cudaMemcpyHostToDevice, c->stream),
                                   "host->device copy"));
    OAR_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(c->staging_done[i], c->stream), "host->device copy: event"));
  }
  return absl::OkStatus();
}

// Device -> pageable host through the staging buffers: chunk k+1's DMA runs
// while chunk k is copied out.
absl::Status StageToHost(CudaContext* c, char* dst, const char* src, size_t n) {
  std::lock_guard<std::mutex> lock(c->staging_mu);
  const size_t chunk = CudaContext::kStagingBytes;
  auto issue = [&](size_t off, int i) {
    const size_t len = std::min(chunk, n - off);
    OAR_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(c->staging[i], src + off, len, cudaMemcpyDeviceToHost, c->stream),
                                   "device->host copy"));
    return CudaStatus(cudaEventRecord(c->staging_done[i], c->stream), "device->host copy: event");
  };
  if (n == 0) return absl::OkStatus();
  OAR_RETURN_IF_ERROR(issue(0, 0));
  for (size_t off = 0, i = 0; off < n; off += chunk, i ^= 1) {
    if (off + chunk < n) OAR_RETURN_IF_ERROR(issue(off + chunk, i ^ 1));
    OAR_RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(c->staging_done[i]), "device->host copy"));
    std::memcpy(dst + off, c->staging[i], std::min(chunk, n - off));
  }
  return absl::OkStatus();
}

}  // namespace

void* AllocOn(const Place& place, size_t bytes) {
  void* p = nullptr;
  const size_t n = std::max<size_t>(bytes, 1);
  if (place.is_pinned()) {
    cudaError_t e = cudaMallocHost(&p, n);
    if (e != cudaSuccess)
      LOG(FATAL) << "CUDAPinnedPlace: cannot allocate " << bytes << " bytes: " << cudaGetErrorString(e);
    return p;
  }
  CHECK(place.is_gpu()) << "AllocOn(" << place.ToString() << ")";
  CudaContext* c = ContextOrDie(place);
  cudaError_t e = cudaMallocAsync(&p, n, c->stream);
  if (e != cudaSuccess) {
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    LOG(FATAL) << place.ToString() << ": cannot allocate " << bytes << " bytes of device memory (" << free_bytes
               << " of " << total << " free): " << cudaGetErrorString(e);
  }
  return p;
}

void FreeOn(const Place& place, void* p) {
  if (p == nullptr) return;
  if (place.is_pinned()) {
    cudaFreeHost(p);
    return;
  }
  CudaContext* c = ContextOrDie(place);
  cudaError_t e = cudaFreeAsync(p, c->stream);
  // At process exit CUDA may be torn down before a static tensor is freed:
  // the driver reclaims the memory anyway, so that is not worth a line.
  LOG_IF(ERROR, e != cudaSuccess && e != cudaErrorCudartUnloading)
      << place.ToString() << ": cudaFreeAsync: " << cudaGetErrorString(e);
}

absl::Status CopyBytes(const Place& dst_place, void* dst, const Place& src_place, const void* src, size_t n) {
  if (n == 0) return absl::OkStatus();
  if (dst_place.is_host() && src_place.is_host()) {
    std::memcpy(dst, src, n);
    return absl::OkStatus();
  }
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  if (dst_place.is_gpu() && src_place.is_gpu()) {
    if (dst_place.device == src_place.device) {
      CudaContext* c = ContextOrDie(dst_place);
      return CudaStatus(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, c->stream), "device->device copy");
    }
    // Across GPUs: wait for the source's producers, then copy on the
    // destination's stream.
    OAR_RETURN_IF_ERROR(SyncPlace(src_place));
    CudaContext* c = ContextOrDie(dst_place);
    return CudaStatus(cudaMemcpyPeerAsync(d, dst_place.device, s, src_place.device, n, c->stream),
                      absl::StrCat(src_place.ToString(), "->", dst_place.ToString(), " copy"));
  }
  if (dst_place.is_gpu()) {  // from the host
    CudaContext* c = ContextOrDie(dst_place);
    if (src_place.is_pinned()) {
      return CudaStatus(cudaMemcpyAsync(d, s, n, cudaMemcpyHostToDevice, c->stream), "pinned->device copy");
    }
    return OnPlace(StageToDevice(c, d, s, n), dst_place);
  }
  CudaContext* c = ContextOrDie(src_place);  // to the host
  if (dst_place.is_pinned()) {
    OAR_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToHost, c->stream), "device->pinned copy"));
    return CudaStatus(cudaStreamSynchronize(c->stream), "device->pinned copy");
  }
  return OnPlace(StageToHost(c, d, s, n), src_place);
}

absl::Status SyncPlace(const Place& place) {
  if (!place.is_gpu()) return absl::OkStatus();
  CudaContext* c = ContextOrDie(place);
  return CudaStatus(cudaStreamSynchronize(c->stream), absl::StrCat(place.ToString(), ": stream"));
}

#else  // !OAR_HAVE_CUDA

void* AllocOn(const Place& place, size_t bytes) {
  LOG(FATAL) << place.ToString() << ": cannot allocate " << bytes << " bytes: " << NoGpuReason();
  return nullptr;
}

void FreeOn(const Place&, void*) {}

absl::Status CopyBytes(const Place& dst_place, void* dst, const Place& src_place, const void* src, size_t n) {
  if (dst_place.is_host() && src_place.is_host()) {
    if (n > 0) std::memcpy(dst, src, n);
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat(src_place.ToString(), " -> ", dst_place.ToString(), " copy: ", NoGpuReason()));
}

absl::Status SyncPlace(const Place& place) {
  if (!place.is_gpu()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(place.ToString(), ": ", NoGpuReason()));
}

#endif

}  // namespace oar
