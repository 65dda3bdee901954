// What the stream transports receive: a message whose payload was read off
// the connection straight into a tensor buffer of its own dtype and shape —
// from a per-connection pool, or the destination's own (a client reading a
// reply into the caller's tensor: OutgoingMessage::reply_into) — and the
// pool.
//
// DecodeInto copies into a destination whose own buffer fits (as over gRPC:
// that keeps the destination's readers and writers ordered as before), and
// hands the buffer itself to one that would allocate anyway; AddPayloadInto (a pserver summing gradients) reads it in place, and the
// buffer then goes back to the pool when the message dies (one handed to a
// destination does not: its readers elsewhere are not ordered before a
// reuse here).
//
// Thread-safety: a BufferPool is safe for concurrent use; a message, like
// every IncomingMessage, is used by one thread at a time.
#pragma once

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/rpc/message.h"
#include "common/tensor.h"

namespace oar::rpc::stream {

class BufferPool {
 public:
  // A tensor of `dims` x `dtype`, in a pooled buffer when one is large
  // enough (its contents are then stale), else newly allocated.
  Tensor Take(const DDim& dims, DataType dtype);
  // Keeps `t`'s buffer for Take, unless another tensor shares it or the
  // pool already holds kMaxKept.
  void Give(Tensor t);

 private:
  static constexpr size_t kMaxKept = 8;
  absl::Mutex mu_;
  std::vector<Tensor> kept_ ABSL_GUARDED_BY(mu_);
};

class ReceivedMessage final : public IncomingMessage {
 public:
  // `payload` holds header.payload_bytes bytes (unused for header-only
  // messages); `pool` (if any) gets the spare buffer back when the message
  // dies. `in_place`: `payload` shares the buffer of the tensor it was read
  // for, which DecodeInto of that tensor then keeps without a copy.
  ReceivedMessage(MessageHeader header, Tensor payload, std::shared_ptr<BufferPool> pool, bool in_place = false)
      : IncomingMessage(std::move(header)), payload_(std::move(payload)), pool_(std::move(pool)), in_place_(in_place) {}
  ~ReceivedMessage() override;
  void CopyPayload(void* dst) const override;
  void ForEachPayloadPiece(const std::function<void(const char*, size_t)>& fn) const override;

 protected:
  bool SharePayloadInto(Tensor* dst) const override;

 private:
  Tensor payload_;
  mutable bool shared_out_ = false;  // DecodeInto handed payload_'s buffer to a tensor
  std::shared_ptr<BufferPool> pool_;
  const bool in_place_;
};

}  // namespace oar::rpc::stream
