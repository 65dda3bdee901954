#include "common/rpc/var_serde.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace oar::rpc {
namespace {

constexpr int kSerializedField = 8;
constexpr int kRowsField = 9;

void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void ReleaseKeepAlive(void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }

// Reads a message spread over gRPC slices without joining them.
class SliceReader {
 public:
  explicit SliceReader(const std::vector<grpc::Slice>& slices) : slices_(slices) { Skip0(); }
  bool done() const { return i_ == slices_.size(); }
  size_t slice() const { return i_; }
  size_t offset() const { return off_; }
  uint64_t remaining() const {
    uint64_t n = 0;
    for (size_t k = i_; k < slices_.size(); ++k) n += slices_[k].size() - (k == i_ ? off_ : 0);
    return n;
  }
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!Bytes(&b, 1)) return false;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // Copies n bytes to dst (or skips them when dst is null).
  bool Bytes(void* dst, uint64_t n) {
    char* d = static_cast<char*>(dst);
    while (n > 0) {
      if (done()) return false;
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n, slices_[i_].size() - off_));
      if (d != nullptr) {
        std::memcpy(d, slices_[i_].begin() + off_, take);
        d += take;
      }
      off_ += take;
      n -= take;
      Skip0();
    }
    return true;
  }

 private:
  void Skip0() {
    while (i_ < slices_.size() && off_ == slices_[i_].size()) {
      ++i_;
      off_ = 0;
    }
  }
  const std::vector<grpc::Slice>& slices_;
  size_t i_ = 0, off_ = 0;
};

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

absl::StatusOr<std::unique_ptr<GrpcMessage>> ParseMessage(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return absl::InvalidArgumentError("message could not be read");
  SliceReader in(slices);
  std::string header;  // every field but 8, re-encoded as read
  bool has_payload = false;
  uint64_t payload_len = 0;
  size_t payload_slice = 0, payload_offset = 0;
  auto bad = [](const std::string& why) { return absl::InvalidArgumentError("malformed VariableMessage: " + why); };
  while (!in.done()) {
    uint64_t tag;
    if (!in.Varint(&tag)) return bad("truncated tag");
    const int field = static_cast<int>(tag >> 3), wire = static_cast<int>(tag & 7);
    if (field == kSerializedField && wire == 2) {
      if (has_payload) return bad("two payloads");
      if (!in.Varint(&payload_len) || payload_len > in.remaining()) return bad("payload longer than the message");
      has_payload = true;
      payload_slice = in.slice();
      payload_offset = in.offset();
      in.Bytes(nullptr, payload_len);
      continue;
    }
    // Copy the field through to the header.
    std::string field_bytes;
    AppendVarint(&field_bytes, tag);
    if (wire == 0) {
      uint64_t v;
      if (!in.Varint(&v)) return bad("truncated varint");
      AppendVarint(&field_bytes, v);
    } else if (wire == 2) {
      uint64_t n;
      if (!in.Varint(&n) || n > in.remaining()) return bad("truncated field");
      AppendVarint(&field_bytes, n);
      const size_t at = field_bytes.size();
      field_bytes.resize(at + n);
      in.Bytes(field_bytes.data() + at, n);
    } else if (wire == 1 || wire == 5) {
      const size_t n = wire == 1 ? 8 : 4;
      const size_t at = field_bytes.size();
      field_bytes.resize(at + n);
      if (!in.Bytes(field_bytes.data() + at, n)) return bad("truncated field");
    } else {
      return bad(absl::StrCat("unsupported wire type ", wire));
    }
    header += field_bytes;
  }
  sendrecv::VariableMessage meta;
  if (!meta.ParseFromString(header)) return bad("header does not parse");
  OAR_ASSIGN_OR_RETURN(MessageHeader h, ParseHeader(std::move(meta), has_payload, payload_len));
  return std::unique_ptr<GrpcMessage>(new GrpcMessage(std::move(h), std::move(slices), payload_slice, payload_offset));
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
