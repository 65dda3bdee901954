#include "common/rpc/stream/received_message.h"

#include <cstring>

namespace oar::rpc::stream {

Tensor BufferPool::Take(const DDim& dims, DataType dtype) {
  Tensor t;
  {
    absl::MutexLock l(&mu_);
    if (!kept_.empty()) {
      t = std::move(kept_.back());
      kept_.pop_back();
    }
  }
  t.set_lod({});
  t.Resize(dims);
  t.mutable_data(dtype);  // reuses the buffer when it is large enough
  return t;
}

void BufferPool::Give(Tensor t) {
  if (!t.initialized() || t.BufferShared()) return;
  absl::MutexLock l(&mu_);
  if (kept_.size() < kMaxKept) kept_.push_back(std::move(t));
}

ReceivedMessage::~ReceivedMessage() {
  // A buffer handed to a destination is its own from then on: whoever reads
  // it there (an optimizer on another thread) is not ordered before a reuse
  // by this connection, so it never comes back to the pool.
  if (pool_ != nullptr && !shared_out_) pool_->Give(std::move(payload_));
}

void ReceivedMessage::CopyPayload(void* dst) const {
  if (header().payload_bytes > 0) std::memcpy(dst, payload_.raw_data(), header().payload_bytes);
}

void ReceivedMessage::ForEachPayloadPiece(const std::function<void(const char*, size_t)>& fn) const {
  if (header().payload_bytes > 0) fn(static_cast<const char*>(payload_.raw_data()), header().payload_bytes);
}

bool ReceivedMessage::SharePayloadInto(Tensor* dst) const {
  if (!payload_.initialized()) return false;
  if (in_place_) {
    // Read into `dst`'s own buffer already: it only takes the shape. Any
    // other destination gets a copy (two variables never share it).
    if (dst->BufferId() != payload_.BufferId()) return false;
    *dst = payload_;
    return true;
  }
  // A destination whose own buffer fits takes a copy (as over gRPC), and
  // this buffer goes back to the pool; only one that would allocate anyway
  // takes the buffer itself.
  if (dst->initialized() && !dst->BufferShared() && dst->dtype() == payload_.dtype() &&
      dst->numel() == payload_.numel()) {
    return false;
  }
  *dst = payload_;  // shares the buffer; this message can still read it
  shared_out_ = true;
  return true;
}

}  // namespace oar::rpc::stream
