#include "common/rpc/message.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/base/tsan.h"

namespace oar::rpc {
namespace {

absl::StatusOr<sendrecv::VariableMessage::Type> WireType(DataType t) {
  switch (t) {
    case DataType::kBool:
      return sendrecv::VariableMessage::BOOL;
    case DataType::kInt16:
      return sendrecv::VariableMessage::INT16;
    case DataType::kInt32:
      return sendrecv::VariableMessage::INT32;
    case DataType::kInt64:
      return sendrecv::VariableMessage::INT64;
    case DataType::kFloat16:
      return sendrecv::VariableMessage::FP16;
    case DataType::kFloat32:
      return sendrecv::VariableMessage::FP32;
    case DataType::kFloat64:
      return sendrecv::VariableMessage::FP64;
    case DataType::kUInt8:
      return sendrecv::VariableMessage::UINT8;
    case DataType::kInt8:
      return sendrecv::VariableMessage::INT8;
  }
  return absl::InvalidArgumentError(absl::StrCat("dtype ", static_cast<int>(t), " cannot be sent"));
}

bool FromWireType(int t, DataType* out) {
  switch (t) {
    case sendrecv::VariableMessage::BOOL:
      *out = DataType::kBool;
      return true;
    case sendrecv::VariableMessage::INT16:
      *out = DataType::kInt16;
      return true;
    case sendrecv::VariableMessage::INT32:
      *out = DataType::kInt32;
      return true;
    case sendrecv::VariableMessage::INT64:
      *out = DataType::kInt64;
      return true;
    case sendrecv::VariableMessage::FP16:
      *out = DataType::kFloat16;
      return true;
    case sendrecv::VariableMessage::FP32:
      *out = DataType::kFloat32;
      return true;
    case sendrecv::VariableMessage::FP64:
      *out = DataType::kFloat64;
      return true;
    case sendrecv::VariableMessage::UINT8:
      *out = DataType::kUInt8;
      return true;
    case sendrecv::VariableMessage::INT8:
      *out = DataType::kInt8;
      return true;
  }
  return false;
}

// dst[i] = base[i] + payload[i]; `base` may be `dst` (adding in place).
template <typename T>
void AddPieces(const IncomingMessage& msg, const T* base, T* dst) {
  // Whole elements straight from each piece; an element cut between two
  // pieces goes through `carry`.
  char carry[sizeof(T)];
  size_t carried = 0;
  msg.ForEachPayloadPiece([&](const char* p, size_t n) {
    if (carried > 0) {
      const size_t take = std::min(n, sizeof(T) - carried);
      std::memcpy(carry + carried, p, take);
      carried += take;
      p += take;
      n -= take;
      if (carried < sizeof(T)) return;
      T v;
      std::memcpy(&v, carry, sizeof(T));
      *dst++ = *base++ + v;
      carried = 0;
    }
    const size_t whole = n / sizeof(T);
    if (reinterpret_cast<uintptr_t>(p) % alignof(T) == 0) {
      const T* src = reinterpret_cast<const T*>(p);
      for (size_t i = 0; i < whole; ++i) dst[i] = base[i] + src[i];
    } else {
      for (size_t i = 0; i < whole; ++i) {
        T v;
        std::memcpy(&v, p + i * sizeof(T), sizeof(T));
        dst[i] = base[i] + v;
      }
    }
    dst += whole;
    base += whole;
    const size_t rest = n - whole * sizeof(T);
    std::memcpy(carry, p + whole * sizeof(T), rest);
    carried = rest;
  });
}

// Adds `msg`'s payload into `dst`, in place when it is writable; a
// read-only one (a view of memory a peer lent) is replaced by a buffer of
// its own (from `pool` when given) holding the sum, in the same pass.
template <typename T>
void AddInto(const IncomingMessage& msg, Tensor* dst, const std::shared_ptr<BufferPool>& pool) {
  if (dst->Writable()) {
    AddPieces(msg, dst->data<T>(), dst->data<T>());
    return;
  }
  const Tensor base = *dst;  // keeps the read-only memory while it is read
  // A buffer of its own: never the read-only one, which `base` shares too.
  if (pool != nullptr) {
    dst->mutable_data_pooled(DataTypeOf<T>::value, pool);
  } else {
    dst->mutable_data<T>();
  }
  AddPieces(msg, base.data<T>(), dst->data<T>());
}

}  // namespace

absl::StatusOr<uint64_t> CheckedBytes(const DDim& dims, DataType dtype) {
  uint64_t n = SizeOf(dtype);
  for (int64_t d : dims) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension in ", dims.ToString()));
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", dims.ToString(), " of ", DataTypeName(dtype), " overflows 64 bits"));
    }
    n *= static_cast<uint64_t>(d);
  }
  // Sizes stay within what int64 element counts and size_t byte counts hold.
  if (n > (uint64_t{1} << 62)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", dims.ToString(), " of ", DataTypeName(dtype), " is larger than any tensor can be"));
  }
  return n;
}

std::string MessageHeader::Describe() const {
  switch (kind) {
    case PayloadKind::kNone:
      return "no value";
    case PayloadKind::kTensor:
      return absl::StrCat(DataTypeName(dtype), dims.ToString());
    case PayloadKind::kRawBytes:
      return absl::StrCat("raw bytes[", payload_bytes, "]");
    case PayloadKind::kSelectedRows:
      return absl::StrCat("SelectedRows ", DataTypeName(dtype), dims.ToString(), " of height ", height);
  }
  return "?";
}

absl::StatusOr<MessageHeader> ParseHeader(sendrecv::VariableMessage meta, bool has_payload, uint64_t payload_len) {
  MessageHeader h;
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed VariableMessage", meta.varname().empty() ? "" : " for '" + meta.varname() + "'", ": ", why));
  };
  if (!has_payload && meta.dims_size() == 0) {  // header only
    if (!meta.rows().empty()) return bad("rows without a value");
    h.meta = std::move(meta);
    return h;
  }
  if (!FromWireType(meta.data_type(), &h.dtype)) return bad(absl::StrCat("unknown data_type ", meta.data_type()));
  for (int64_t d : meta.dims()) {
    if (d < 0) return bad(absl::StrCat("negative dimension ", d));
    h.dims.push_back(d);
  }
  switch (meta.type()) {
    case sendrecv::LOD_TENSOR:
      h.kind = PayloadKind::kTensor;
      break;
    case sendrecv::SELECTED_ROWS:
      h.kind = PayloadKind::kSelectedRows;
      break;
    case sendrecv::NCCL_ID:
      h.kind = PayloadKind::kRawBytes;
      h.dtype = DataType::kUInt8;
      if (h.dims.size() == 0) h.dims.push_back(static_cast<int64_t>(payload_len));
      break;
    default:
      return bad(absl::StrCat("unknown type ", meta.type()));
  }
  auto bytes = CheckedBytes(h.dims, h.dtype);
  if (!bytes.ok()) return bad(std::string(bytes.status().message()));
  h.payload_bytes = *bytes;
  if (h.payload_bytes != (has_payload ? payload_len : 0)) {
    return bad(absl::StrCat("payload has ", has_payload ? payload_len : 0, " bytes, its header says ",
                            DataTypeName(h.dtype), h.dims.ToString()));
  }
  for (const auto& level : meta.lod()) {
    std::vector<size_t> l;
    for (int64_t v : level.lod_data()) {
      if (v < 0 || (!l.empty() && static_cast<size_t>(v) < l.back())) return bad("LoD offsets decrease");
      l.push_back(static_cast<size_t>(v));
    }
    h.lod.push_back(std::move(l));
  }
  if (!h.lod.empty() &&
      (h.dims.size() == 0 || h.lod.back().empty() || h.lod.back().back() != static_cast<size_t>(h.dims[0]))) {
    return bad("LoD does not end at the tensor's first dimension");
  }
  if (h.kind == PayloadKind::kSelectedRows) {
    const std::string& rows = meta.rows();
    if (rows.size() % sizeof(int64_t) != 0) return bad("rows is not a whole number of int64");
    h.height = meta.slr_height();
    if (h.height < 0) return bad(absl::StrCat("negative height ", h.height));
    h.rows.resize(rows.size() / sizeof(int64_t));
    if (!rows.empty()) std::memcpy(h.rows.data(), rows.data(), rows.size());
    if (h.dims.size() == 0 || static_cast<size_t>(h.dims[0]) != h.rows.size()) {
      return bad(absl::StrCat(h.rows.size(), " rows but the value has shape ", h.dims.ToString()));
    }
    for (int64_t row : h.rows) {
      if (row < 0 || row >= h.height) return bad(absl::StrCat("row ", row, " outside height ", h.height));
    }
    meta.clear_rows();
  } else if (!meta.rows().empty()) {
    return bad("rows on a variable that is not SelectedRows");
  }
  h.meta = std::move(meta);
  return h;
}

absl::StatusOr<MessageHeader> HeaderOf(sendrecv::VariableMessage meta, const Variable* var, bool raw_bytes) {
  const Tensor* payload = nullptr;
  const std::string name = meta.varname();
  if (var != nullptr && var->IsType<Tensor>()) {
    payload = &var->Get<Tensor>();
    meta.set_type(raw_bytes ? sendrecv::NCCL_ID : sendrecv::LOD_TENSOR);
    meta.set_lod_level(static_cast<int64_t>(payload->lod().size()));
    for (const auto& level : payload->lod()) {
      auto* l = meta.add_lod();
      for (size_t v : level) l->add_lod_data(static_cast<int64_t>(v));
    }
  } else if (var != nullptr && var->IsType<SelectedRows>()) {
    const SelectedRows& sr = var->Get<SelectedRows>();
    payload = &sr.value;
    meta.set_type(sendrecv::SELECTED_ROWS);
    meta.set_slr_height(sr.height);
    meta.set_rows(sr.rows.data(), sr.rows.size() * sizeof(int64_t));
  } else if (var != nullptr && var->IsInitialized()) {
    return absl::InvalidArgumentError(absl::StrCat("variable '", name, "' holds neither a tensor nor SelectedRows"));
  }
  uint64_t len = 0;
  if (payload != nullptr) {
    if (payload->numel() > 0 && !payload->initialized()) {
      return absl::FailedPreconditionError(absl::StrCat("variable '", name, "' has no data to send"));
    }
    OAR_ASSIGN_OR_RETURN(auto t, WireType(payload->dtype()));
    meta.set_data_type(t);
    for (int64_t d : payload->dims()) meta.add_dims(d);
    len = payload->nbytes();
  }
  return ParseHeader(std::move(meta), payload != nullptr, len);
}

void IncomingMessage::DecodeInto(Variable* var) const {
  const MessageHeader& h = header_;
  if (h.kind == PayloadKind::kNone) {
    var->Clear();
    return;
  }
  Tensor* t;
  if (h.kind == PayloadKind::kSelectedRows) {
    SelectedRows* sr = var->GetMutable<SelectedRows>();
    sr->rows = h.rows;
    sr->height = h.height;
    t = &sr->value;
  } else {
    t = var->GetMutable<Tensor>();
  }
  if (h.payload_bytes > 0 && SharePayloadInto(t)) {
    t->set_lod(h.lod);
    return;
  }
  t->set_lod(h.lod);
  t->Resize(h.dims);
  void* dst = t->mutable_data(h.dtype);
  if (h.payload_bytes > 0) CopyPayload(dst);
}

absl::Status IncomingMessage::AddPayloadInto(Tensor* dst, const std::shared_ptr<BufferPool>& pool) const {
  const MessageHeader& h = header_;
  if (h.kind != PayloadKind::kTensor || !dst->initialized() || dst->dtype() != h.dtype ||
      static_cast<uint64_t>(dst->numel()) * SizeOf(h.dtype) != h.payload_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("'", h.name(), "' (", h.Describe(), ") cannot be added into ",
                                                   DataTypeName(dst->dtype()), dst->dims().ToString()));
  }
  switch (h.dtype) {
    case DataType::kFloat32:
      AddInto<float>(*this, dst, pool);
      break;
    case DataType::kFloat64:
      AddInto<double>(*this, dst, pool);
      break;
    case DataType::kInt32:
      AddInto<int32_t>(*this, dst, pool);
      break;
    case DataType::kInt64:
      AddInto<int64_t>(*this, dst, pool);
      break;
    default:
      return absl::UnimplementedError(absl::StrCat("adding ", DataTypeName(h.dtype), " payloads ('", h.name(), "')"));
  }
  return absl::OkStatus();
}

InMemoryMessage::~InMemoryMessage() {
  // Done reading the sender's buffer: see Tensor::mutable_data.
  if (const Tensor* t = payload()) OAR_TSAN_RELEASE(t->BufferId());
}

const Tensor* InMemoryMessage::payload() const {
  if (var_.IsType<Tensor>()) return &var_.Get<Tensor>();
  if (var_.IsType<SelectedRows>()) return &var_.Get<SelectedRows>().value;
  return nullptr;
}

void InMemoryMessage::CopyPayload(void* dst) const {
  const Tensor* t = payload();
  if (t != nullptr && header().payload_bytes > 0) std::memcpy(dst, t->raw_data(), header().payload_bytes);
}

void InMemoryMessage::ForEachPayloadPiece(const std::function<void(const char*, size_t)>& fn) const {
  const Tensor* t = payload();
  if (t != nullptr && header().payload_bytes > 0) fn(static_cast<const char*>(t->raw_data()), header().payload_bytes);
}

}  // namespace oar::rpc
