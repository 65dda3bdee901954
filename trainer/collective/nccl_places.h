// NcclPlaces: the GPUs of one process as one NCCL clique, a communicator
// per GPU made together by ncclCommInitAll, through which the
// ParallelExecutor sums gradients and broadcasts parameters across its GPU
// places. Each operation is one NCCL group call over every place's buffer,
// queued on each GPU's own stream (common/device/cuda_context.h): after
// the kernels already queued there (those that wrote the buffer), before
// the ones queued later (those that read the result). A call returns once
// it is queued; an error on a GPU surfaces at the next synchronization of
// that place (the executor synchronizes every place at the end of a step).
//
//   OAR_ASSIGN_OR_RETURN(auto clique, NcclPlaces::Create({0, 1}));
//   OAR_RETURN_IF_ERROR(clique->AllReduce({&grad_on_gpu0, &grad_on_gpu1}, "fc_0.w_0@GRAD"));
//
// Destroying the clique waits for the NCCL work queued on the GPUs' streams.
//
// Compiled when CUDA and NCCL are found (OAR_HAVE_NCCL); otherwise Create
// answers Unimplemented. With NCCL, Create answers FailedPrecondition for a
// GPU that is not visible.
//
// Thread-safety: every method is safe from any thread. Calls run one at a
// time, so each communicator sees the operations in the same order, as
// NCCL requires of a clique one process drives. Two cliques over the same
// GPUs must not be used at once (their orders could interleave): executors
// that share variables share one clique.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/tensor.h"

namespace oar {

class NcclPlaces {
 public:
  // `devices`: distinct CUDA ordinals. InvalidArgument for none or a
  // repeated one (NCCL puts one rank on a GPU).
  static absl::StatusOr<std::unique_ptr<NcclPlaces>> Create(const std::vector<int>& devices);
  virtual ~NcclPlaces() = default;

  // In every call bufs[i] lives on CUDAPlace(devices[i]) and all hold the
  // same dtype and element count; errors name the tensor and the place.
  // Every buffer becomes the sum of all (fp32, fp64, fp16, int32, int64).
  virtual absl::Status AllReduce(const std::vector<Tensor*>& bufs, const std::string& name) = 0;
  // bufs[root] becomes the sum of all; the others keep their values.
  virtual absl::Status Reduce(const std::vector<Tensor*>& bufs, size_t root, const std::string& name) = 0;
  // bufs[root]'s bytes into every other buffer (any dtype).
  virtual absl::Status Broadcast(const std::vector<Tensor*>& bufs, size_t root, const std::string& name) = 0;
};

}  // namespace oar
