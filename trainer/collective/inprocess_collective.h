// The in-process backend: ranks that are threads of one process, sharing
// memory. An operation is a rendezvous: every rank deposits its tensor, each
// then does its share of the work straight on the others' buffers (rank r
// reduces slice r of an all-reduce and then copies the other slices from
// their owners), and no rank leaves before all are done with its buffer.
//
// The slice kernels are public: the ParallelExecutor's cross-place
// all-reduce, reduce and broadcast handles call them (one handle per slice,
// scheduled by its SSA graph), so Oar has one in-process all-reduce.
//
//   InProcessGroup group(4, absl::Seconds(30));
//   // on thread r:
//   std::unique_ptr<Collective> c = group.Rank(r);
//   OAR_RETURN_IF_ERROR(c->AllReduce(&t, "g"));
//
// Thread-safety: the group is shared by its ranks' threads; each rank's
// Collective is used by its own thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "trainer/collective/collective.h"

namespace oar {

// Elements [lo, hi) of `bufs[home]` += the same elements of every other
// buffer, in index order. The buffers hold the same dtype and count.
absl::Status ReduceSlice(const std::vector<Tensor*>& bufs, size_t home, int64_t lo, int64_t hi);
// Elements [lo, hi) of `bufs[from]` copied into every other buffer.
void CopySlice(const std::vector<Tensor*>& bufs, size_t from, int64_t lo, int64_t hi);

class InProcessGroup {
 public:
  InProcessGroup(int size, absl::Duration timeout);
  ~InProcessGroup();
  // Rank r's communicator (0 <= r < size); the group must outlive it.
  std::unique_ptr<Collective> Rank(int r);
  int size() const { return size_; }

 private:
  friend class InProcessRank;
  enum class Op { kAllReduce, kBroadcast, kAllGather, kBarrier };
  struct Slot {
    Op op = Op::kBarrier;
    std::string name;
    Tensor* inout = nullptr;
    const Tensor* in = nullptr;
    int root = 0;
    // inout's dtype and size, copied when the slot is deposited: the ranks
    // compare these, never another rank's tensor, which a rank that found a
    // disagreement and left no longer keeps alive.
    DataType dtype = DataType::kFloat32;
    int64_t numel = -1;  // -1: no inout
  };
  // Waits until every rank reached barrier `phase` of the current round;
  // the error names the ranks that did not.
  absl::Status Await(int rank, const char* what, const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Run(int rank, Slot slot, std::vector<Tensor>* gathered);

  const int size_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> arrivals_ ABSL_GUARDED_BY(mu_);  // barriers passed, per rank
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oar
