// Collective: one communicator among `size()` ranks — threads of one process,
// trainer processes over TCP, or GPUs over NCCL — with the operations
// data-parallel training needs, in the spirit of gloo's and c10d's:
//
//   AllReduce   sum of every rank's tensor, in place, on every rank (or of a
//               bucket of tensors, where the backend can: AllReduceBucket)
//   Broadcast   root's tensor onto every rank, in place
//   AllGather   every rank's tensor (sizes may differ), in rank order
//   Barrier     returns once every rank has entered it
//
// Every rank calls the same operations in the same order with tensors of
// the same dtype and element count (AllGather: any count). A call ends with
// OK on every rank, or with an error that names the operation, the tensor
// and the peer (rank and endpoint) that failed, disagreed or did not answer
// within the communicator's timeout (--rpc_deadline in `oar`): never a
// hang, never an abort. After an error the communicator is broken: later
// calls fail at once.
//
//   std::unique_ptr<Collective> c = ...;  // inprocess_collective.h, tcp_ring.h, nccl_collective.h
//   OAR_RETURN_IF_ERROR(c->AllReduce(&grad, "fc_0.w_0@GRAD"));
//
// Dtypes: AllReduce fp32, fp64, fp16, int32, int64; the others any.
//
// Thread-safety: a Collective is used by one thread at a time (the rank's).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/framework/tensor.h"

namespace oar {

class Collective {
 public:
  virtual ~Collective() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "in-process", "tcp-ring", "nccl".
  virtual std::string backend() const = 0;

  // `t` must hold data (a zero-size tensor is fine).
  virtual absl::Status AllReduce(Tensor* t, const std::string& name) = 0;
  // Sums each tensor of `bucket` (host tensors of one dtype: gradients fused
  // into one all-reduce) as one all-reduce of their concatenation would,
  // moving them where they lie — for a backend that can
  // (AllReducesBucketsInPlace; shared memory does, saving the two copies of
  // packing). Elsewhere Unimplemented: the caller packs them into one tensor
  // for AllReduce (the ParallelExecutor keeps that buffer).
  virtual bool AllReducesBucketsInPlace() const { return false; }
  virtual absl::Status AllReduceBucket(const std::vector<Tensor*>& bucket, const std::string& name) {
    return absl::UnimplementedError(absl::StrCat(backend(), " packs buckets: call AllReduce on one tensor"));
  }
  virtual absl::Status Broadcast(Tensor* t, int root, const std::string& name) = 0;
  // `out` gets size() tensors of `in`'s dtype: rank i's at [i], each as
  // that rank sent it (shape included).
  virtual absl::Status AllGather(const Tensor& in, std::vector<Tensor>* out, const std::string& name) = 0;
  virtual absl::Status Barrier() = 0;
  // After a call failed: the ranks it gave up on because they did not come
  // within the communicator's timeout while every other rank did — silent
  // that long, so lost or stuck (an elastic job takes them out). Empty
  // where the backend cannot tell a silent rank from one held up by it (a
  // ring's rank waits on its neighbour, which may itself be waiting).
  virtual std::vector<int> Unanswered() const { return {}; }
};

}  // namespace oar
