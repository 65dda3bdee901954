#include "trainer/collective/nccl_collective.h"

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/config.h"
#include "common/device/device_memory.h"

#if OAR_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "trainer/collective/nccl_util.h"
#endif

namespace oar {

#if OAR_HAVE_NCCL
namespace {

absl::Status Cuda(cudaError_t e, const char* call, int device) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, " on GPU ", device, ": ", cudaGetErrorString(e)));
}

class NcclCollective : public Collective {
 public:
  NcclCollective(const NcclOptions& o) : o_(o) {}
  ~NcclCollective() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    if (buffer_ != nullptr) cudaFree(buffer_);
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    OAR_RETURN_IF_ERROR(Cuda(cudaSetDevice(o_.device), "cudaSetDevice", o_.device));
    OAR_RETURN_IF_ERROR(
        Cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate", o_.device));
    ncclUniqueId id;
    std::memcpy(&id, o_.unique_id, sizeof(id));
    return NcclStatus(ncclCommInitRank(&comm_, o_.size, id, o_.rank), "ncclCommInitRank");
  }

  int rank() const override { return o_.rank; }
  int size() const override { return o_.size; }
  std::string backend() const override { return "nccl"; }

  absl::Status AllReduce(Tensor* t, const std::string& name) override {
    OAR_ASSIGN_OR_RETURN(ncclDataType_t type, NcclSumType(t->dtype(), name));
    return Staged(t, name, "AllReduce", [&](void* buf) {
      return NcclStatus(ncclAllReduce(buf, buf, static_cast<size_t>(t->numel()), type, ncclSum, comm_, stream_),
                        "ncclAllReduce");
    });
  }

  // Bytes, whatever the dtype (bool and int16 parameters too), as the TCP
  // ring broadcasts them.
  absl::Status Broadcast(Tensor* t, int root, const std::string& name) override {
    return Staged(t, name, "Broadcast", [&](void* buf) {
      return NcclStatus(ncclBroadcast(buf, buf, t->nbytes(), ncclUint8, root, comm_, stream_), "ncclBroadcast");
    });
  }

  absl::Status AllGather(const Tensor& in_any, std::vector<Tensor>* out, const std::string& name) override {
    // The blocks are assembled on the host: a device tensor is read there first.
    Tensor host_in;
    if (!in_any.place().is_host()) {
      OAR_RETURN_IF_ERROR(Annotate(in_any.CopyTo(CPUPlace(), &host_in), absl::StrCat("AllGather '", name, "'")));
    }
    const Tensor& in = in_any.place().is_host() ? in_any : host_in;
    // Sizes first, then every block padded to the largest.
    Tensor sizes;
    int64_t* s = sizes.mutable_data<int64_t>({o_.size});
    std::memset(s, 0, sizeof(int64_t) * static_cast<size_t>(o_.size));
    s[o_.rank] = static_cast<int64_t>(in.nbytes());
    OAR_RETURN_IF_ERROR(AllReduce(&sizes, name + "@sizes"));
    int64_t most = 0;
    for (int r = 0; r < o_.size; ++r) most = std::max(most, s[r]);
    Tensor all;
    char* a = reinterpret_cast<char*>(all.mutable_data<uint8_t>({most * o_.size}));
    std::memset(a, 0, static_cast<size_t>(most * o_.size));
    std::memcpy(a + most * o_.rank, in.raw_data(), in.nbytes());
    Tensor mine;
    mine.mutable_data<uint8_t>({most});
    OAR_RETURN_IF_ERROR(Staged(&all, name, "AllGather", [&](void* buf) {
      char* b = static_cast<char*>(buf);
      return NcclStatus(ncclAllGather(b + most * o_.rank, b, static_cast<size_t>(most), ncclUint8, comm_, stream_),
                        "ncclAllGather");
    }));
    // Blocks share every dimension but the first (rows of a sparse
    // gradient); the first follows from each block's bytes.
    const int64_t row = in.dims().size() > 1 ? in.dims().Product(1, in.dims().size()) : 1;
    const int64_t row_bytes = row * static_cast<int64_t>(SizeOf(in.dtype()));
    out->assign(static_cast<size_t>(o_.size), Tensor());
    for (int r = 0; r < o_.size; ++r) {
      Tensor& dst = (*out)[static_cast<size_t>(r)];
      DDim d = in.dims().size() > 0 ? in.dims() : DDim{1};
      d[0] = row_bytes > 0 ? s[r] / row_bytes : 0;
      dst.Resize(d);
      void* p = dst.mutable_data(in.dtype());
      if (s[r] > 0) std::memcpy(p, a + most * r, static_cast<size_t>(s[r]));
    }
    return absl::OkStatus();
  }

  absl::Status Barrier() override {
    Tensor one;
    one.mutable_data<int32_t>({1})[0] = 1;
    return AllReduce(&one, "barrier");
  }

 private:
  template <typename Fn>
  absl::Status Staged(Tensor* t, const std::string& name, const char* what, Fn collective) {
    if (broken_) return absl::FailedPreconditionError("the NCCL communicator was aborted by an earlier failure");
    auto fail = [&](const absl::Status& s) {
      return Annotate(s, absl::StrCat(what, " '", name, "' on rank ", o_.rank));
    };
    // The caller may be any thread (the ordered-collectives thread too):
    // every CUDA call below is for the communicator's GPU.
    if (absl::Status s = Cuda(cudaSetDevice(o_.device), "cudaSetDevice", o_.device); !s.ok()) return fail(s);
    if (t->place().is_gpu()) {  // in place on the device, once the ops that wrote it are done
      if (t->place().device != o_.device) {
        return fail(absl::InvalidArgumentError(
            absl::StrCat("the tensor is on ", t->place().ToString(), ", the communicator on GPU ", o_.device)));
      }
      if (absl::Status s = SyncPlace(t->place()); !s.ok()) return fail(s);
      if (absl::Status s = collective(t->raw_data()); !s.ok()) return fail(s);
      return WaitForStream(fail);
    }
    // A host tensor goes through a device buffer and a pinned one: a copy
    // from pageable memory back to the host would block this thread until
    // the collective before it ends (never, when a peer died), where the
    // copy from pinned memory is queued and WaitForStream bounds the wait.
    const size_t bytes = t->nbytes();
    if (bytes > capacity_) {
      if (buffer_ != nullptr) cudaFree(buffer_);
      if (pinned_ != nullptr) cudaFreeHost(pinned_);
      buffer_ = pinned_ = nullptr;
      capacity_ = 0;
      if (absl::Status s = Cuda(cudaMalloc(&buffer_, bytes), "cudaMalloc", o_.device); !s.ok()) return fail(s);
      if (absl::Status s = Cuda(cudaMallocHost(&pinned_, bytes), "cudaMallocHost", o_.device); !s.ok()) return fail(s);
      capacity_ = bytes;
    }
    if (bytes > 0) {
      std::memcpy(pinned_, t->raw_data(), bytes);
      absl::Status s =
          Cuda(cudaMemcpyAsync(buffer_, pinned_, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync", o_.device);
      if (!s.ok()) return fail(s);
    }
    if (absl::Status s = collective(buffer_); !s.ok()) return fail(s);
    if (bytes > 0) {
      absl::Status s =
          Cuda(cudaMemcpyAsync(pinned_, buffer_, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync", o_.device);
      if (!s.ok()) return fail(s);
    }
    OAR_RETURN_IF_ERROR(WaitForStream(fail));
    if (bytes > 0) std::memcpy(t->raw_data(), pinned_, bytes);
    return absl::OkStatus();
  }

  // Bounded wait: poll the stream, abort the communicator at the deadline.
  template <typename Fail>
  absl::Status WaitForStream(Fail fail) {
    const absl::Time deadline = absl::Now() + o_.timeout;
    while (true) {
      const cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) return absl::OkStatus();
      if (q != cudaErrorNotReady) return fail(Cuda(q, "cudaStreamQuery", o_.device));
      ncclResult_t async_error = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async_error);
      if (async_error != ncclSuccess || absl::Now() > deadline) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        broken_ = true;
        return fail(async_error != ncclSuccess ? NcclStatus(async_error, "NCCL")
                                               : absl::DeadlineExceededError(absl::StrCat(
                                                     "not finished after ", absl::FormatDuration(o_.timeout),
                                                     " (a peer died or hangs; FLAGS_rpc_deadline)")));
      }
      absl::SleepFor(absl::Microseconds(20));
    }
  }

  NcclOptions o_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* buffer_ = nullptr;  // a host tensor's bytes on the GPU
  void* pinned_ = nullptr;  // and on the host, pinned: both capacity_ bytes
  size_t capacity_ = 0;
  bool broken_ = false;
};

}  // namespace

bool NcclAvailable() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(const NcclOptions& options) {
  if (!NcclAvailable())
    return absl::FailedPreconditionError("the NCCL backend needs a GPU; this host has none visible");
  if (options.unique_id == nullptr) return absl::InvalidArgumentError("the NCCL backend needs the ncclUniqueId");
  auto c = std::make_unique<NcclCollective>(options);
  OAR_RETURN_IF_ERROR(c->Init());
  return std::unique_ptr<Collective>(std::move(c));
}

#else  // !OAR_HAVE_NCCL

bool NcclAvailable() { return false; }

absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(const NcclOptions&) {
  return absl::UnimplementedError("this Oar was built without NCCL (CUDA and NCCL were not found)");
}

#endif

}  // namespace oar
