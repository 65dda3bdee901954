#include "common/rpc/stream/received_message.h"

#include <cstring>

namespace oar::rpc::stream {

void ReceivedMessage::CopyPayload(void* dst) const {
  if (header().payload_bytes > 0) std::memcpy(dst, payload_.raw_data(), header().payload_bytes);
}

void ReceivedMessage::ForEachPayloadPiece(const std::function<void(const char*, size_t)>& fn) const {
  if (header().payload_bytes > 0) fn(static_cast<const char*>(payload_.raw_data()), header().payload_bytes);
}

bool ReceivedMessage::SharePayloadInto(Tensor* dst) const {
  if (!payload_.initialized()) return false;
  // Read into another tensor's own buffer (reply_into): only that tensor
  // keeps it; any other destination gets a copy (two variables never share
  // it).
  if (in_place_ && dst->BufferId() != payload_.BufferId()) return false;
  *dst = payload_;  // shares the buffer; this message can still read it
  return true;
}

}  // namespace oar::rpc::stream
