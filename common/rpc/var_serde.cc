#include "common/rpc/var_serde.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace oar::rpc {
namespace {

constexpr int kSerializedField = 8;

absl::StatusOr<sendrecv::VariableMessage::Type> WireType(DataType t) {
  switch (t) {
    case DataType::kBool: return sendrecv::VariableMessage::BOOL;
    case DataType::kInt16: return sendrecv::VariableMessage::INT16;
    case DataType::kInt32: return sendrecv::VariableMessage::INT32;
    case DataType::kInt64: return sendrecv::VariableMessage::INT64;
    case DataType::kFloat16: return sendrecv::VariableMessage::FP16;
    case DataType::kFloat32: return sendrecv::VariableMessage::FP32;
    case DataType::kFloat64: return sendrecv::VariableMessage::FP64;
    case DataType::kUInt8: return sendrecv::VariableMessage::UINT8;
    case DataType::kInt8: return sendrecv::VariableMessage::INT8;
  }
  return absl::InvalidArgumentError(absl::StrCat("dtype ", static_cast<int>(t), " cannot be sent"));
}

absl::StatusOr<DataType> FromWireType(int t, const std::string& name) {
  switch (t) {
    case sendrecv::VariableMessage::BOOL: return DataType::kBool;
    case sendrecv::VariableMessage::INT16: return DataType::kInt16;
    case sendrecv::VariableMessage::INT32: return DataType::kInt32;
    case sendrecv::VariableMessage::INT64: return DataType::kInt64;
    case sendrecv::VariableMessage::FP16: return DataType::kFloat16;
    case sendrecv::VariableMessage::FP32: return DataType::kFloat32;
    case sendrecv::VariableMessage::FP64: return DataType::kFloat64;
    case sendrecv::VariableMessage::UINT8: return DataType::kUInt8;
    case sendrecv::VariableMessage::INT8: return DataType::kInt8;
  }
  return absl::InvalidArgumentError(absl::StrCat("variable '", name, "': unknown data_type ", t));
}

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
  size_t remaining() const {
    size_t n = 0;
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
  bool Bytes(void* dst, size_t n) {
    char* d = static_cast<char*>(dst);
    while (n > 0) {
      if (done()) return false;
      const size_t take = std::min(n, slices_[i_].size() - off_);
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

}  // namespace

absl::StatusOr<grpc::ByteBuffer> SerializeVar(const std::string& name, const Variable* var,
                                              const SendOptions& options) {
  sendrecv::VariableMessage meta;
  meta.set_varname(name);
  meta.set_trainer_id(options.trainer_id);
  meta.set_out_varname(options.out_varname);
  meta.set_table_name(options.table_name);
  const Tensor* payload = nullptr;
  if (var != nullptr && var->IsType<Tensor>()) {
    payload = &var->Get<Tensor>();
    meta.set_type(options.raw_bytes ? sendrecv::NCCL_ID : sendrecv::LOD_TENSOR);
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
  if (payload != nullptr) {
    if (payload->numel() > 0 && !payload->initialized()) {
      return absl::FailedPreconditionError(absl::StrCat("variable '", name, "' has no data to send"));
    }
    OAR_ASSIGN_OR_RETURN(auto t, WireType(payload->dtype()));
    meta.set_data_type(t);
    for (int i = 0; i < payload->dims().size(); ++i) meta.add_dims(payload->dims()[i]);
  }
  std::string header;
  meta.SerializeToString(&header);
  std::vector<grpc::Slice> slices;
  const size_t nbytes = payload != nullptr ? payload->nbytes() : 0;
  if (payload != nullptr) {
    AppendVarint(&header, (kSerializedField << 3) | 2);  // length-delimited field 8
    AppendVarint(&header, nbytes);
  }
  slices.emplace_back(header);
  if (nbytes > 0) {
    auto* keep = new std::shared_ptr<const void>(payload->KeepAlive());
    slices.emplace_back(const_cast<void*>(payload->raw_data()), nbytes, &ReleaseKeepAlive, keep);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

absl::StatusOr<Received> DeserializeVar(const grpc::ByteBuffer& buffer, const SpareFn& spare) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return absl::InvalidArgumentError("message could not be read");
  SliceReader in(slices);
  Received r;
  std::string header;  // every field but 8, re-encoded as read
  Tensor payload;
  bool has_payload = false;
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed VariableMessage", r.meta.varname().empty() ? "" : " for '" + r.meta.varname() + "'",
                     ": ", why));
  };
  while (!in.done()) {
    uint64_t tag;
    if (!in.Varint(&tag)) return bad("truncated tag");
    const int field = static_cast<int>(tag >> 3), wire = static_cast<int>(tag & 7);
    if (field == kSerializedField && wire == 2) {
      uint64_t n;
      if (!in.Varint(&n) || n > in.remaining()) return bad("payload longer than the message");
      if (!r.meta.ParseFromString(header)) return bad("header does not parse");
      OAR_ASSIGN_OR_RETURN(DataType dt, FromWireType(r.meta.data_type(), r.meta.varname()));
      DDim dims;
      for (int64_t d : r.meta.dims()) {
        if (d < 0) return bad(absl::StrCat("negative dimension ", d));
        dims.push_back(d);
      }
      if (r.meta.type() == sendrecv::NCCL_ID && dims.size() == 0) dims.push_back(static_cast<int64_t>(n));
      if (static_cast<uint64_t>(dims.numel()) * SizeOf(dt) != n) {
        return bad(absl::StrCat("payload has ", n, " bytes, its header says ", DataTypeName(dt), dims.ToString()));
      }
      if (spare) {
        Variable old = spare(r.meta);
        if (old.IsType<Tensor>()) payload = std::move(*old.GetMutable<Tensor>());
        else if (old.IsType<SelectedRows>()) payload = std::move(old.GetMutable<SelectedRows>()->value);
      }
      payload.set_lod({});
      payload.Resize(dims);
      void* dst = payload.mutable_data(dt);
      if (!in.Bytes(dst, n)) return bad("truncated payload");
      has_payload = true;
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
  if (!r.meta.ParseFromString(header)) return bad("header does not parse");
  if (!has_payload) {
    if (r.meta.dims_size() > 0) {  // an empty tensor travels without field 8
      OAR_ASSIGN_OR_RETURN(DataType dt, FromWireType(r.meta.data_type(), r.meta.varname()));
      DDim dims;
      for (int64_t d : r.meta.dims()) dims.push_back(d);
      if (dims.numel() != 0) return bad("tensor without payload");
      payload.Resize(dims);
      payload.mutable_data(dt);
      has_payload = true;
    } else {
      return r;  // header only
    }
  }
  // LoD: offsets must be non-decreasing and end at dim 0.
  LoD lod;
  for (const auto& level : r.meta.lod()) {
    std::vector<size_t> l;
    for (int64_t v : level.lod_data()) {
      if (v < 0 || (!l.empty() && static_cast<size_t>(v) < l.back())) return bad("LoD offsets decrease");
      l.push_back(static_cast<size_t>(v));
    }
    lod.push_back(std::move(l));
  }
  if (!lod.empty() && (payload.dims().size() == 0 || lod.back().empty() ||
                       lod.back().back() != static_cast<size_t>(payload.dims()[0]))) {
    return bad("LoD does not end at the tensor's first dimension");
  }
  payload.set_lod(lod);
  if (r.meta.type() == sendrecv::SELECTED_ROWS) {
    const std::string& rows = r.meta.rows();
    if (rows.size() % sizeof(int64_t) != 0) return bad("rows is not a whole number of int64");
    SelectedRows* sr = r.var.GetMutable<SelectedRows>();
    sr->rows.resize(rows.size() / sizeof(int64_t));
    if (!rows.empty()) std::memcpy(sr->rows.data(), rows.data(), rows.size());
    sr->height = r.meta.slr_height();
    if (payload.dims().size() == 0 || static_cast<size_t>(payload.dims()[0]) != sr->rows.size()) {
      return bad(absl::StrCat(sr->rows.size(), " rows but the value has shape ", payload.dims().ToString()));
    }
    for (int64_t row : sr->rows) {
      if (row < 0 || row >= sr->height) return bad(absl::StrCat("row ", row, " outside height ", sr->height));
    }
    sr->value = std::move(payload);
    r.meta.clear_rows();
  } else {
    *r.var.GetMutable<Tensor>() = std::move(payload);
  }
  return r;
}

}  // namespace oar::rpc
