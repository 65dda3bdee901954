// WatchedCollective: a Collective that passes every call to another and
// remembers whether any failed — how an elastic nccl2 trainer tells a step
// that failed because its ring broke (a peer died or stopped answering: it
// rolls back to its last commit and forms the next ring) from one that
// failed on its own (a bad feed, a NaN: the error ends the trainer as in
// any job).
//
// Thread-safety: calls as the wrapped backend allows (one thread at a
// time); failed() may be read from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/collective/collective.h"

namespace oar {

class WatchedCollective final : public Collective {
 public:
  explicit WatchedCollective(std::unique_ptr<Collective> inner) : inner_(std::move(inner)) {}

  bool failed() const { return failed_.load(std::memory_order_acquire); }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return inner_->backend(); }
  absl::Status AllReduce(Tensor* t, const std::string& name) override { return Watch(inner_->AllReduce(t, name)); }
  bool AllReducesBucketsInPlace() const override { return inner_->AllReducesBucketsInPlace(); }
  absl::Status AllReduceBucket(const std::vector<Tensor*>& bucket, const std::string& name) override {
    return Watch(inner_->AllReduceBucket(bucket, name));
  }
  absl::Status Broadcast(Tensor* t, int root, const std::string& name) override {
    return Watch(inner_->Broadcast(t, root, name));
  }
  absl::Status AllGather(const Tensor& in, std::vector<Tensor>* out, const std::string& name) override {
    return Watch(inner_->AllGather(in, out, name));
  }
  absl::Status Barrier() override { return Watch(inner_->Barrier()); }
  std::vector<int> Unanswered() const override { return inner_->Unanswered(); }

 private:
  absl::Status Watch(absl::Status s) {
    if (!s.ok()) failed_.store(true, std::memory_order_release);
    return s;
  }

  std::unique_ptr<Collective> inner_;
  std::atomic<bool> failed_{false};
};

}  // namespace oar
