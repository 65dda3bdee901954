#include "common/rpc/var_serde.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/base/tsan.h"

namespace oar::rpc {
namespace {

constexpr int kSerializedField = 8;
constexpr int kRowsField = 9;

void AppendVarint(std::string* out, uint64_t v) {
  uint8_t buf[10];  // a varint of 64 bits takes at most 10 bytes
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(v, buf);
  out->append(reinterpret_cast<const char*>(buf), static_cast<size_t>(end - buf));
}

void ReleaseKeepAlive(void* p) {
  auto* keep = static_cast<std::shared_ptr<const void>*>(p);
  OAR_TSAN_RELEASE(keep->get());  // gRPC has written the payload: see Tensor::mutable_data
  delete keep;
}

const Tensor* PayloadOf(const Variable* var) {
  if (var == nullptr) return nullptr;
  if (var->IsType<Tensor>()) return &var->Get<Tensor>();
  if (var->IsType<SelectedRows>()) return &var->Get<SelectedRows>().value;
  return nullptr;
}

}  // namespace

absl::StatusOr<grpc::ByteBuffer> SerializeMessage(const MessageHeader& header, const Variable* var) {
  std::string bytes;
  header.meta.SerializeToString(&bytes);
  if (header.kind == PayloadKind::kSelectedRows) {
    AppendVarint(&bytes, (kRowsField << 3) | 2);
    AppendVarint(&bytes, header.rows.size() * sizeof(int64_t));
    bytes.append(reinterpret_cast<const char*>(header.rows.data()), header.rows.size() * sizeof(int64_t));
  }
  const Tensor* payload = header.kind == PayloadKind::kNone ? nullptr : PayloadOf(var);
  if (header.kind != PayloadKind::kNone && (payload == nullptr || payload->nbytes() != header.payload_bytes)) {
    return absl::InternalError(absl::StrCat("'", header.name(), "': the variable no longer matches its header"));
  }
  std::vector<grpc::Slice> slices;
  if (payload != nullptr) {
    AppendVarint(&bytes, (kSerializedField << 3) | 2);  // length-delimited field 8
    AppendVarint(&bytes, header.payload_bytes);
  }
  slices.emplace_back(bytes);
  if (payload != nullptr && header.payload_bytes > 0) {
    auto* keep = new std::shared_ptr<const void>(payload->KeepAlive());
    slices.emplace_back(const_cast<void*>(payload->raw_data()), header.payload_bytes, &ReleaseKeepAlive, keep);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Reads the message with protobuf's CodedInputStream over gRPC's own
// ZeroCopyInputStream on the received slices (nothing joined or copied but
// the header fields); the payload (field 8) is skipped, and its slice and
// offset kept for the one copy into the destination tensor.
absl::StatusOr<std::unique_ptr<GrpcMessage>> ParseMessage(const grpc::ByteBuffer& buffer) {
  namespace io = google::protobuf::io;
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return absl::InvalidArgumentError("message could not be read");
  uint64_t total = 0;
  for (const auto& s : slices) total += s.size();
  auto bad = [](const std::string& why) { return absl::InvalidArgumentError("malformed VariableMessage: " + why); };
  // gRPC itself caps a message below 2 GiB (an int); so does CodedInputStream.
  if (total > static_cast<uint64_t>(std::numeric_limits<int>::max())) return bad("longer than 2 GiB");
  grpc::ByteBuffer view(buffer);  // shares the slices
  grpc::ProtoBufferReader reader(&view);
  if (!reader.status().ok()) return absl::InvalidArgumentError("message could not be read");
  io::CodedInputStream in(&reader);
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  std::string header;  // every field but 8, re-encoded as read
  bool has_payload = false;
  uint64_t payload_len = 0, payload_at = 0;
  {
    io::StringOutputStream header_stream(&header);
    io::CodedOutputStream out(&header_stream);
    auto left = [&] { return total - static_cast<uint64_t>(in.CurrentPosition()); };
    while (left() > 0) {
      const uint32_t tag = in.ReadTag();
      if (tag == 0) return bad("truncated tag");
      const int field = static_cast<int>(tag >> 3), wire = static_cast<int>(tag & 7);
      if (field == kSerializedField && wire == 2) {
        if (has_payload) return bad("two payloads");
        if (!in.ReadVarint64(&payload_len) || payload_len > left()) return bad("payload longer than the message");
        has_payload = true;
        payload_at = static_cast<uint64_t>(in.CurrentPosition());
        if (!in.Skip(static_cast<int>(payload_len))) return bad("payload longer than the message");
        continue;
      }
      out.WriteTag(tag);  // the field, through to the header
      if (wire == 0) {
        uint64_t v;
        if (!in.ReadVarint64(&v)) return bad("truncated varint");
        out.WriteVarint64(v);
      } else if (wire == 2) {
        uint64_t n;
        std::string bytes;
        if (!in.ReadVarint64(&n) || n > left() || !in.ReadString(&bytes, static_cast<int>(n))) {
          return bad("truncated field");
        }
        out.WriteVarint64(n);
        out.WriteString(bytes);
      } else if (wire == 1) {
        uint64_t v;
        if (!in.ReadLittleEndian64(&v)) return bad("truncated field");
        out.WriteLittleEndian64(v);
      } else if (wire == 5) {
        uint32_t v;
        if (!in.ReadLittleEndian32(&v)) return bad("truncated field");
        out.WriteLittleEndian32(v);
      } else {
        return bad(absl::StrCat("unsupported wire type ", wire));
      }
    }
  }  // `out` flushed into `header`
  // The payload's first byte as (slice, offset).
  size_t payload_slice = 0;
  uint64_t payload_offset = payload_at;
  while (payload_slice < slices.size() && payload_offset >= slices[payload_slice].size()) {
    payload_offset -= slices[payload_slice].size();
    ++payload_slice;
  }
  sendrecv::VariableMessage meta;
  if (!meta.ParseFromString(header)) return bad("header does not parse");
  OAR_ASSIGN_OR_RETURN(MessageHeader h, ParseHeader(std::move(meta), has_payload, payload_len));
  return std::unique_ptr<GrpcMessage>(
      new GrpcMessage(std::move(h), std::move(slices), payload_slice, static_cast<size_t>(payload_offset)));
}

void GrpcMessage::ForEachPayloadPiece(const std::function<void(const char*, size_t)>& fn) const {
  uint64_t left = header().payload_bytes;
  size_t off = offset_;
  for (size_t i = slice_; i < slices_.size() && left > 0; ++i) {
    const size_t take = static_cast<size_t>(std::min<uint64_t>(left, slices_[i].size() - off));
    if (take > 0) fn(reinterpret_cast<const char*>(slices_[i].begin()) + off, take);
    left -= take;
    off = 0;
  }
}

void GrpcMessage::CopyPayload(void* dst) const {
  char* d = static_cast<char*>(dst);
  ForEachPayloadPiece([&d](const char* p, size_t n) {
    std::memcpy(d, p, n);
    d += n;
  });
}

}  // namespace oar::rpc
