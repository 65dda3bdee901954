#include "trainer/collective/nccl_places.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status.h"
#include "common/config.h"
#include "common/device/gpu_info.h"

#if OAR_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include "common/device/cuda_context.h"
#include "trainer/collective/nccl_util.h"
#endif

namespace oar {

namespace {

absl::Status CheckDevices(const std::vector<int>& devices) {
  if (devices.empty()) return absl::InvalidArgumentError("NcclPlaces needs at least one GPU");
  std::set<int> seen;
  for (int d : devices) {
    if (!seen.insert(d).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("CUDAPlace(", d, ") is given twice: NCCL puts one rank on a GPU, so each place needs its own"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

#if OAR_HAVE_NCCL
namespace {

// Restores the calling thread's current GPU on scope exit: a group call
// touches every GPU of the clique, and the caller's thread runs one place.
class KeepCurrentDevice {
 public:
  KeepCurrentDevice() { cudaGetDevice(&device_); }
  ~KeepCurrentDevice() { cudaSetDevice(device_); }

 private:
  int device_ = 0;
};

class NcclPlacesImpl : public NcclPlaces {
 public:
  explicit NcclPlacesImpl(std::vector<int> devices) : devices_(std::move(devices)) {}
  // Lets the queued NCCL work finish, then finalizes the communicators
  // together (one thread drives every rank, so as one group) and frees them.
  ~NcclPlacesImpl() override {
    if (comms_.empty() || comms_[0] == nullptr) return;
    KeepCurrentDevice keep;
    for (cudaStream_t s : streams_) cudaStreamSynchronize(s);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
    ncclGroupStart();
    for (ncclComm_t c : comms_) ncclCommFinalize(c);
    ncclGroupEnd();
#endif
    for (ncclComm_t c : comms_) ncclCommDestroy(c);
  }

  absl::Status Init() {
    KeepCurrentDevice keep;
    for (int d : devices_) {
      OAR_ASSIGN_OR_RETURN(CudaContext * c, GetCudaContext(d));
      streams_.push_back(c->stream);
      pools_.push_back(c->pool);
    }
    // Memory from one GPU's stream-ordered pool is open to the others where
    // the hardware allows peer access (NCCL may read a peer's buffer).
    for (size_t i = 0; i < devices_.size(); ++i) {
      for (size_t j = 0; j < devices_.size(); ++j) {
        int can = 0;
        if (i == j || cudaDeviceCanAccessPeer(&can, devices_[j], devices_[i]) != cudaSuccess || !can) continue;
        cudaMemAccessDesc access = {};
        access.location.type = cudaMemLocationTypeDevice;
        access.location.id = devices_[j];
        access.flags = cudaMemAccessFlagsProtReadWrite;
        OAR_RETURN_IF_ERROR(
            CudaStatus(cudaMemPoolSetAccess(pools_[i], &access, 1),
                       absl::StrCat("opening GPU ", devices_[i], "'s memory pool to GPU ", devices_[j])));
      }
    }
    comms_.assign(devices_.size(), nullptr);
    absl::Status s = NcclStatus(ncclCommInitAll(comms_.data(), static_cast<int>(devices_.size()), devices_.data()),
                                absl::StrCat("ncclCommInitAll over ", devices_.size(), " GPUs"));
    if (!s.ok()) comms_.clear();
    return s;
  }

  absl::Status AllReduce(const std::vector<Tensor*>& bufs, const std::string& name) override {
    OAR_RETURN_IF_ERROR(Check(bufs, name, "all-reduce"));
    OAR_ASSIGN_OR_RETURN(ncclDataType_t type, NcclSumType(bufs[0]->dtype(), name));
    const size_t count = static_cast<size_t>(bufs[0]->numel());
    return Group(name, "all-reduce", [&](size_t i) {
      void* p = bufs[i]->raw_data();
      return ncclAllReduce(p, p, count, type, ncclSum, comms_[i], streams_[i]);
    });
  }

  absl::Status Reduce(const std::vector<Tensor*>& bufs, size_t root, const std::string& name) override {
    OAR_RETURN_IF_ERROR(Check(bufs, name, "reduce"));
    if (root >= bufs.size()) return absl::InvalidArgumentError(absl::StrCat("reduce '", name, "': no place ", root));
    OAR_ASSIGN_OR_RETURN(ncclDataType_t type, NcclSumType(bufs[0]->dtype(), name));
    const size_t count = static_cast<size_t>(bufs[0]->numel());
    return Group(name, "reduce", [&](size_t i) {
      void* p = bufs[i]->raw_data();
      return ncclReduce(p, p, count, type, ncclSum, static_cast<int>(root), comms_[i], streams_[i]);
    });
  }

  absl::Status Broadcast(const std::vector<Tensor*>& bufs, size_t root, const std::string& name) override {
    OAR_RETURN_IF_ERROR(Check(bufs, name, "broadcast"));
    if (root >= bufs.size()) return absl::InvalidArgumentError(absl::StrCat("broadcast '", name, "': no place ", root));
    const size_t bytes = bufs[0]->nbytes();
    return Group(name, "broadcast", [&](size_t i) {
      void* p = bufs[i]->raw_data();
      return ncclBroadcast(p, p, bytes, ncclUint8, static_cast<int>(root), comms_[i], streams_[i]);
    });
  }

 private:
  absl::Status Check(const std::vector<Tensor*>& bufs, const std::string& name, const char* what) const {
    if (bufs.size() != devices_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " '", name, "': ", bufs.size(), " tensors for ", devices_.size(), " GPUs"));
    }
    for (size_t i = 0; i < bufs.size(); ++i) {
      const Tensor& t = *bufs[i];
      if (!t.initialized() || !(t.place() == CUDAPlace(devices_[i]))) {
        return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "': place ", i, "'s tensor is on ",
                                                       t.initialized() ? t.place().ToString() : "no place",
                                                       ", not CUDAPlace(", devices_[i], ")"));
      }
      if (t.dtype() != bufs[0]->dtype() || t.numel() != bufs[0]->numel()) {
        return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "': place ", i, " holds ", t.numel(), " ",
                                                       DataTypeName(t.dtype()), ", place 0 ", bufs[0]->numel(), " ",
                                                       DataTypeName(bufs[0]->dtype())));
      }
    }
    return absl::OkStatus();
  }

  // One NCCL call per GPU, `call(i)` for GPU i, as one group.
  template <typename Call>
  absl::Status Group(const std::string& name, const char* what, Call call) {
    absl::MutexLock lock(&mu_);
    KeepCurrentDevice keep;
    const std::string label = absl::StrCat(what, " '", name, "' across ", devices_.size(), " GPUs");
    OAR_RETURN_IF_ERROR(NcclStatus(ncclGroupStart(), label));
    ncclResult_t first = ncclSuccess;
    for (size_t i = 0; i < devices_.size() && first == ncclSuccess; ++i) first = call(i);
    const ncclResult_t end = ncclGroupEnd();
    OAR_RETURN_IF_ERROR(NcclStatus(first, label));
    return NcclStatus(end, label);
  }

  const std::vector<int> devices_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaMemPool_t> pools_;
  std::vector<ncclComm_t> comms_;
  absl::Mutex mu_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<NcclPlaces>> NcclPlaces::Create(const std::vector<int>& devices) {
  OAR_RETURN_IF_ERROR(CheckDevices(devices));
  for (int d : devices) OAR_RETURN_IF_ERROR(RequireGpu(d));
  auto clique = std::make_unique<NcclPlacesImpl>(devices);
  OAR_RETURN_IF_ERROR(clique->Init());
  return std::unique_ptr<NcclPlaces>(std::move(clique));
}

#else  // !OAR_HAVE_NCCL

absl::StatusOr<std::unique_ptr<NcclPlaces>> NcclPlaces::Create(const std::vector<int>& devices) {
  OAR_RETURN_IF_ERROR(CheckDevices(devices));
  return absl::UnimplementedError(
      "several GPUs in one process sum their gradients through NCCL, which this oar was built without");
}

#endif

}  // namespace oar
