#include "common/rpc/stream/frame_io.h"
#include "common/base/status.h"
#include "common/rpc/status_payloads.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/tsan.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/rpc_metrics.h"
#include "glog/logging.h"

namespace oar::rpc::stream {
namespace {

const Tensor* PayloadTensor(const MessageHeader& h, const Variable* var) {
  if (h.kind == PayloadKind::kNone || var == nullptr) return nullptr;
  if (var->IsType<SelectedRows>()) return &var->Get<SelectedRows>().value;
  if (var->IsType<Tensor>()) return &var->Get<Tensor>();
  return nullptr;
}

}  // namespace

absl::Time IoDeadline(absl::Duration io_timeout) { return absl::Now() + io_timeout; }

absl::Status ClientHandshake(ByteStream* s, const std::string& token, absl::Time deadline, const SharedRegion* own,
                             bool* server_maps, bool map_server_region) {
  if (server_maps != nullptr) *server_maps = false;
  Hello hello;
  hello.token_len = static_cast<uint32_t>(token.size());
  if (s->CanLendRegions() && map_server_region) hello.flags |= Hello::kMapsRegions;
  if (token.size() > kMaxTokenBytes) return absl::InvalidArgumentError("OAR_AUTH_TOKEN is longer than 4096 bytes");
  // Our region's fd goes first, on the socket: the server looks for it once
  // the Hello says so.
  if (own != nullptr && s->CanLendRegions()) {
    if (absl::Status l = s->LendRegion(*own); l.ok()) {
      hello.flags |= Hello::kLendsRegion;
    } else {
      LOG(WARNING) << "cannot lend shared memory to " << s->peer() << " (its sends are copied instead): " << l;
    }
  }
  absl::Status st = s->Write({{&hello, sizeof(hello)}, {token.data(), token.size()}}, deadline);
  if (!st.ok()) return st;
  Welcome w;
  st = s->Read(&w, sizeof(w), deadline);
  if (!st.ok()) return st;
  if (w.magic != kWelcomeMagic || w.text_len > kMaxErrorTextBytes ||
      w.code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::UnavailableError(absl::StrCat(s->peer(), " does not speak Oar's stream protocol"));
  }
  std::string text(w.text_len, '\0');
  st = s->Read(text.data(), text.size(), deadline);
  if (!st.ok()) return st;
  if (w.code != 0) return absl::Status(static_cast<absl::StatusCode>(w.code), absl::StrCat(s->peer(), ": ", text));
  uint32_t asked = 0;
  if (hello.flags & Hello::kMapsRegions) asked |= Welcome::kLentRegion;
  if (hello.flags & Hello::kLendsRegion) asked |= Welcome::kMapsClientRegion;
  if (w.flags & ~asked) {
    return absl::UnavailableError(
        absl::StrCat(s->peer(), " answered with flags ", w.flags, " that were not asked for"));
  }
  if (server_maps != nullptr) *server_maps = (w.flags & Welcome::kMapsClientRegion) != 0;
  if (w.flags & Welcome::kLentRegion) return s->MapLentRegion(deadline);
  return absl::OkStatus();
}

absl::Status ServerHandshake(ByteStream* s, const std::string& token, absl::Time deadline, const SharedRegion* region,
                             bool* lent, bool map_client_region) {
  if (lent != nullptr) *lent = false;
  Hello hello;
  absl::Status st = s->Read(&hello, sizeof(hello), deadline);
  if (!st.ok()) return st;
  if (hello.magic != kHelloMagic || hello.token_len > kMaxTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(s->peer(), " does not speak Oar's stream protocol"));
  }
  std::string got(hello.token_len, '\0');
  st = s->Read(got.data(), got.size(), deadline);
  if (!st.ok()) return st;
  absl::Status verdict;
  if (hello.version != kVersion) {
    verdict = absl::FailedPreconditionError(
        absl::StrCat("stream protocol version ", hello.version, " is not this server's ", kVersion));
  } else if (!token.empty() && !SameToken(got, token)) {
    verdict = absl::UnauthenticatedError("missing or wrong auth token (the server has OAR_AUTH_TOKEN set)");
  }
  Welcome w;
  w.code = static_cast<uint32_t>(verdict.code());
  // The client's region, whose fd it sent before the Hello: mapped, or
  // (declined) taken off the socket, where it would sit for good.
  if ((hello.flags & Hello::kLendsRegion) && hello.version == kVersion && s->CanLendRegions()) {
    if (verdict.ok() && map_client_region) {
      if (absl::Status m = s->MapLentRegion(deadline); m.ok()) {
        w.flags |= Welcome::kMapsClientRegion;
      } else {
        LOG(WARNING) << "cannot map the shared memory " << s->peer() << " lends (its sends are copied instead): " << m;
      }
    } else if (absl::Status d = s->DropLentRegion(deadline); !d.ok()) {
      VLOG(1) << "declined the shared memory " << s->peer() << " offered: " << d;
    }
  }
  // The region's fd goes first, on the socket: the client looks for it
  // once the Welcome says so.
  if (verdict.ok() && region != nullptr && (hello.flags & Hello::kMapsRegions) && s->CanLendRegions()) {
    if (absl::Status l = s->LendRegion(*region); l.ok()) {
      w.flags |= Welcome::kLentRegion;
      if (lent != nullptr) *lent = true;
    } else {
      LOG(WARNING) << "cannot lend shared memory to " << s->peer() << " (its Gets are copied instead): " << l;
    }
  }
  const std::string text(verdict.message());
  w.text_len = static_cast<uint32_t>(text.size());
  st = s->Write({{&w, sizeof(w)}, {text.data(), text.size()}}, deadline);
  if (!verdict.ok()) return Rewrap(verdict, absl::StrCat(s->peer(), ": ", verdict.message()));
  return st;
}

absl::Status WriteMessage(ByteStream* s, FrameType type, uint8_t kind, uint64_t call_id, uint32_t timeout_ms,
                          const MessageHeader& h, const Variable* var, absl::Time deadline, bool more,
                          const SharedRegion* region) {
  sendrecv::VariableMessage meta = h.meta;
  if (h.kind == PayloadKind::kSelectedRows) {
    meta.set_rows(reinterpret_cast<const char*>(h.rows.data()), h.rows.size() * sizeof(int64_t));
  }
  const std::string bytes = meta.SerializeAsString();
  const Tensor* payload = PayloadTensor(h, var);
  if (h.kind != PayloadKind::kNone && (payload == nullptr || payload->nbytes() != h.payload_bytes)) {
    return absl::InternalError(absl::StrCat("'", h.name(), "': the value changed while it was being sent"));
  }
  FrameHeader f;
  f.type = type;
  f.kind = kind;
  f.has_payload = h.kind != PayloadKind::kNone;
  f.call_id = call_id;
  f.meta_len = static_cast<uint32_t>(bytes.size());
  f.timeout_ms = timeout_ms;
  f.payload_len = h.payload_bytes;
  std::vector<ConstPiece> pieces = {{&f, sizeof(f)}, {bytes.data(), bytes.size()}};
  const int64_t offset =
      region != nullptr && h.payload_bytes > 0 ? region->OffsetOf(payload->raw_data(), h.payload_bytes) : -1;
  if (offset >= 0) {
    f.flags = FrameHeader::kInRegion;
    pieces.push_back({&offset, sizeof(offset)});
    static metrics::Counter* const server_lent = Metrics().server_lent_bytes->With({});
    static metrics::Counter* const client_lent = Metrics().client_lent_bytes->With({});
    (type == FrameType::kRequest ? client_lent : server_lent)->Add(static_cast<double>(h.payload_bytes));
  } else if (h.payload_bytes > 0) {
    pieces.push_back({payload->raw_data(), h.payload_bytes});
  }
  absl::Status st = more ? s->WriteMore(pieces, deadline) : s->Write(pieces, deadline);
  // Done reading the tensor: its next writer may reuse the buffer once this
  // share is dropped (see Tensor::mutable_data).
  if (payload != nullptr) OAR_TSAN_RELEASE(payload->BufferId());
  return st;
}

absl::Status WriteError(ByteStream* s, uint64_t call_id, const absl::Status& error, absl::Time deadline) {
  std::string text(error.message().substr(0, kMaxErrorTextBytes));
  const std::string payloads = EncodePayloads(error);  // bounded: kMaxPayloads short lines
  FrameHeader f;
  f.type = FrameType::kError;
  f.kind = static_cast<uint8_t>(error.ok() ? absl::StatusCode::kUnknown : error.code());
  f.call_id = call_id;
  f.meta_len = static_cast<uint32_t>(text.size());
  f.payload_len = payloads.size();
  return s->Write({{&f, sizeof(f)}, {text.data(), text.size()}, {payloads.data(), payloads.size()}}, deadline);
}

absl::Status Skip(ByteStream* s, uint64_t n, absl::Time deadline) {
  char scratch[64 * 1024];
  while (n > 0) {
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof(scratch)));
    absl::Status st = s->Read(scratch, k, deadline);
    if (!st.ok()) return st;
    n -= k;
  }
  return absl::OkStatus();
}

ReadResult ReadMessage(ByteStream* s, const FrameHeader& f, const Admit& admit, const std::shared_ptr<BufferPool>& pool,
                       absl::Time deadline) {
  ReadResult r;
  std::string bytes(f.meta_len, '\0');
  r.stream = s->Read(bytes.data(), bytes.size(), deadline);
  if (!r.stream.ok()) return r;
  sendrecv::VariableMessage meta;
  absl::StatusOr<MessageHeader> h = absl::InvalidArgumentError(
      absl::StrCat("malformed VariableMessage from ", s->peer(), ": its header does not parse"));
  if (meta.ParseFromString(bytes) && meta.serialized().empty())
    h = ParseHeader(std::move(meta), f.has_payload != 0, f.payload_len);
  // A payload in the lent region: its offset is what the stream carries.
  const bool in_region = (f.flags & FrameHeader::kInRegion) != 0;
  std::shared_ptr<const SharedRegion> region;
  const char* lent = nullptr;
  if (in_region) {
    uint64_t offset = 0;
    r.stream = s->Read(&offset, sizeof(offset), deadline);
    if (!r.stream.ok()) return r;
    region = s->lent_region();
    lent = region != nullptr ? region->At(offset, f.payload_len) : nullptr;
    if (h.ok() && lent == nullptr) {
      h = absl::InvalidArgumentError(absl::StrCat(s->peer(), f.type == FrameType::kRequest ? " sent '" : " answered '",
                                                  h->name(), "' with ", f.payload_len, " bytes at offset ", offset,
                                                  region != nullptr
                                                      ? absl::StrCat(" of the ", region->size(), "-byte region it lent")
                                                      : " of a region it never lent"));
    }
  }
  absl::StatusOr<Destination> to = h.ok() ? admit(*h) : h.status();
  if (!to.ok()) {
    r.stream = in_region ? absl::OkStatus() : Skip(s, f.payload_len, deadline);
    r.message = to.status();
    return r;
  }
  if (in_region && to->view && h->kind == PayloadKind::kTensor && h->payload_bytes > 0) {
    // No copy: the value is read where the peer keeps it (RpcClient::
    // AsyncGetView, LentSends say for how long it holds).
    static metrics::Counter* const client_viewed = Metrics().client_viewed_bytes->With({});
    static metrics::Counter* const server_viewed = Metrics().server_viewed_bytes->With({});
    (f.type == FrameType::kRequest ? server_viewed : client_viewed)->Add(static_cast<double>(h->payload_bytes));
    Tensor view = Tensor::OverReadOnlyMemory(lent, h->dims, h->dtype, std::move(region));
    r.message = std::make_unique<ReceivedMessage>(*std::move(h), std::move(view), /*in_place=*/false);
    return r;
  }
  Tensor* const into = h->payload_bytes > 0 ? to->tensor : nullptr;
  Tensor payload;
  void* dst = nullptr;
  if (into != nullptr) {
    dst = into->mutable_data(into->dtype());  // its own buffer, of the payload's size (checked by admit)
    payload = *into;                          // shares it
    payload.Resize(h->dims);
  } else if (h->payload_bytes > 0) {
    payload.Resize(h->dims);
    dst = payload.mutable_data_pooled(h->dtype, pool);
  }
  if (dst != nullptr && in_region) {
    std::memcpy(dst, lent, h->payload_bytes);
  } else if (dst != nullptr) {
    r.stream = s->Read(dst, h->payload_bytes, into != nullptr ? std::min(deadline, to->deadline) : deadline);
    if (!r.stream.ok()) return r;
  }
  r.message = std::make_unique<ReceivedMessage>(*std::move(h), std::move(payload), /*in_place=*/into != nullptr);
  return r;
}

absl::Status ReadError(ByteStream* s, const FrameHeader& f, absl::Status* error, absl::Time deadline) {
  std::string text(f.meta_len, '\0'), payloads(f.payload_len, '\0');  // CheckFrame bounded both
  absl::Status st = s->Read(text.data(), text.size(), deadline);
  if (st.ok() && !payloads.empty()) st = s->Read(payloads.data(), payloads.size(), deadline);
  if (!st.ok()) return st;
  *error = absl::Status(static_cast<absl::StatusCode>(f.kind), text);
  DecodePayloads(payloads, error);
  return absl::OkStatus();
}

}  // namespace oar::rpc::stream
