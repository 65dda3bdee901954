// Serde between Oar's messages (message.h) and Fluid's
// sendrecv.VariableMessage bytes in gRPC byte buffers.
//
// Sending copies nothing of the payload: the header (every field but
// `serialized`) is encoded by protobuf, and `serialized` (field 8) follows as
// a slice that references the tensor's buffer and keeps it alive until gRPC
// has written it. Receiving parses and checks the whole header first
// (ParseHeader: sizes with overflow-checked arithmetic, LoD, rows) while the
// payload stays in gRPC's slices; the receiver then copies it once, straight
// into its destination, or adds it into a buffer.
//
// Thread-safety: stateless functions; a GrpcMessage is used by one thread at
// a time.
#pragma once

#include <grpcpp/support/byte_buffer.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rpc/message.h"

namespace oar::rpc {

// The bytes of a message with `header` whose payload is `var`'s tensor (or
// SelectedRows value); `var` may be null for a header-only message.
absl::StatusOr<grpc::ByteBuffer> SerializeMessage(const MessageHeader& header, const Variable* var);

// A received message over the slices of the byte buffer it arrived in.
class GrpcMessage final : public IncomingMessage {
 public:
  void CopyPayload(void* dst) const override;
  void ForEachPayloadPiece(const std::function<void(const char*, size_t)>& fn) const override;

 private:
  friend absl::StatusOr<std::unique_ptr<GrpcMessage>> ParseMessage(const grpc::ByteBuffer& buffer);
  GrpcMessage(MessageHeader header, std::vector<grpc::Slice> slices, size_t slice, size_t offset)
      : IncomingMessage(std::move(header)), slices_(std::move(slices)), slice_(slice), offset_(offset) {}
  std::vector<grpc::Slice> slices_;  // hold gRPC's references: no copy of the payload
  size_t slice_ = 0, offset_ = 0;    // where the payload starts
};

// Parses and checks `buffer` (it may be released afterwards: the message
// holds references to its slices). InvalidArgument naming the variable for a
// message that does not parse or whose sizes do not add up.
absl::StatusOr<std::unique_ptr<GrpcMessage>> ParseMessage(const grpc::ByteBuffer& buffer);

}  // namespace oar::rpc
