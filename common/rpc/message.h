// Messages between trainers and pservers as Oar's types, independent of the
// transport that carried them (gRPC bytes, or a variable handed over inside
// one process).
//
// An IncomingMessage is a received request or reply whose header has been
// parsed and checked — every size, with overflow-checked arithmetic, against
// the bytes that actually arrived — before any payload byte is copied. The
// receiver looks at header() (name, dtype, dims, SelectedRows rows) to decide
// whether to accept it and where its payload goes, and only then copies it
// (DecodeInto) or adds it into a buffer (AddPayloadInto). So a message that
// claims 2^62 elements costs nothing: it is refused from its header.
//
//   const MessageHeader& h = msg.header();
//   if (h.dtype != DataType::kFloat32) return error;
//   OAR_RETURN_IF_ERROR(msg.DecodeInto(&var));       // reuses var's buffer when it can
//
// Thread-safety: an IncomingMessage is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/buffer_pool.h"
#include "common/framework/ddim.h"
#include "common/framework/variable.h"
#include "proto/send_recv.pb.h"

namespace oar::rpc {

// What a message carries.
enum class PayloadKind {
  kNone,          // header only (control messages, Get requests)
  kTensor,        // a (LoD)Tensor
  kSelectedRows,  // rows + a value tensor with one row per entry of rows
  kRawBytes,      // an NCCL id: uint8 bytes
};

struct MessageHeader {
  sendrecv::VariableMessage meta;  // every field but `serialized` and `rows`
  PayloadKind kind = PayloadKind::kNone;
  DataType dtype = DataType::kFloat32;
  DDim dims;                   // the tensor's (the SelectedRows value's) shape; all >= 0
  uint64_t payload_bytes = 0;  // = numel(dims) * SizeOf(dtype), checked
  LoD lod;                     // checked: non-decreasing, ending at dims[0]
  std::vector<int64_t> rows;   // kSelectedRows: each in [0, height)
  int64_t height = 0;          // kSelectedRows

  const std::string& name() const { return meta.varname(); }
  int64_t trainer_id() const { return meta.trainer_id(); }
  // "float32[2, 3]", "SelectedRows float32[5, 8] of height 100", "no value".
  std::string Describe() const;
};

// Builds and checks a header from what arrived: `meta` (without
// `serialized`; its `rows` bytes are moved into the header), whether a
// payload field was present and its length. Checks dims >= 0, the byte count
// with overflow-checked arithmetic against `payload_len`, the LoD and the
// rows; InvalidArgument naming the variable otherwise.
absl::StatusOr<MessageHeader> ParseHeader(sendrecv::VariableMessage meta, bool has_payload, uint64_t payload_len);

// The header a variable (Tensor, SelectedRows, or nothing) travels with;
// `raw_bytes` marks a uint8 tensor as an NCCL id. `meta` must already carry
// the name and the sender's fields (trainer_id, seq, ...).
absl::StatusOr<MessageHeader> HeaderOf(sendrecv::VariableMessage meta, const Variable* var, bool raw_bytes = false);

// The product of `dims` in bytes of `dtype`; InvalidArgument when a
// dimension is negative or the product overflows.
absl::StatusOr<uint64_t> CheckedBytes(const DDim& dims, DataType dtype);

class IncomingMessage {
 public:
  explicit IncomingMessage(MessageHeader header) : header_(std::move(header)) {}
  virtual ~IncomingMessage() = default;
  const MessageHeader& header() const { return header_; }

  // Copies the header().payload_bytes payload bytes to `dst`.
  virtual void CopyPayload(void* dst) const = 0;
  // Calls `fn` on consecutive pieces of the payload, in order (a piece may
  // end in the middle of an element).
  virtual void ForEachPayloadPiece(const std::function<void(const char* data, size_t size)>& fn) const = 0;

  // The message as a variable — a Tensor (with LoD), a SelectedRows, or
  // nothing for a header-only message — written into `var`, reusing its
  // tensor buffer when it is large enough and not shared.
  void DecodeInto(Variable* var) const;
  // Adds the payload elementwise into `dst`, which must hold exactly
  // header().dtype (fp32, fp64, int32 or int64) and as many elements;
  // InvalidArgument otherwise. No intermediate buffer: in place, or — for a
  // read-only `dst` (Tensor::Writable; a view of memory a peer lent) — into
  // a buffer of dst's own (from `pool` when given), in the same pass.
  absl::Status AddPayloadInto(Tensor* dst, const std::shared_ptr<BufferPool>& pool = nullptr) const;

 protected:
  // A message whose payload already sits in a tensor buffer of the right
  // dtype and shape may hand that buffer to DecodeInto's tensor instead of
  // copying it (true); the message must still read the same bytes after.
  virtual bool SharePayloadInto(Tensor* /*dst*/) const { return false; }

 private:
  MessageHeader header_;
};

// An IncomingMessage over a variable handed over in memory (the in-process
// transport): the payload is read from the variable's tensor, which must
// stay unchanged while the message is used.
class InMemoryMessage final : public IncomingMessage {
 public:
  InMemoryMessage(MessageHeader header, Variable var) : IncomingMessage(std::move(header)), var_(std::move(var)) {}
  ~InMemoryMessage() override;
  void CopyPayload(void* dst) const override;
  void ForEachPayloadPiece(const std::function<void(const char*, size_t)>& fn) const override;

 private:
  const Tensor* payload() const;
  Variable var_;
};

}  // namespace oar::rpc
