// What the stream transports receive: a message whose payload was read off
// the connection straight into a tensor buffer of its own dtype and shape —
// one from the connection's BufferPool (common/base/buffer_pool.h), or the
// destination's own (a client reading a reply into the caller's tensor:
// OutgoingMessage::reply_into).
//
// DecodeInto hands the pooled buffer itself to the destination tensor (no
// copy); the buffer goes back to the connection's pool when the
// destination lets go of it (its next value, a pserver freeing a merge
// buffer), warm for the next message of its size. AddPayloadInto (a
// pserver summing gradients) reads it in place, and it goes back when the
// message dies.
//
// Thread-safety: as every IncomingMessage, used by one thread at a time.
#pragma once

#include <memory>

#include "common/base/buffer_pool.h"
#include "common/framework/tensor.h"
#include "common/rpc/message.h"

namespace oar::rpc::stream {

class ReceivedMessage final : public IncomingMessage {
 public:
  // `payload` holds header.payload_bytes bytes (unused for header-only
  // messages). `in_place`: `payload` shares the buffer of the tensor it was
  // read for, which DecodeInto of that tensor then keeps as it is.
  ReceivedMessage(MessageHeader header, Tensor payload, bool in_place = false)
      : IncomingMessage(std::move(header)), payload_(std::move(payload)), in_place_(in_place) {}
  void CopyPayload(void* dst) const override;
  void ForEachPayloadPiece(const std::function<void(const char*, size_t)>& fn) const override;

 protected:
  bool SharePayloadInto(Tensor* dst) const override;

 private:
  Tensor payload_;
  const bool in_place_;
};

}  // namespace oar::rpc::stream
