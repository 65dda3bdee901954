#include "common/rpc/stream/wire.h"

#include "absl/strings/str_cat.h"

namespace oar::rpc::stream {

absl::Status CheckFrame(const FrameHeader& h, bool expect_request, const std::string& peer) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(peer, " sent a malformed frame: ", what));
  };
  if (h.magic != kFrameMagic) return bad(absl::StrCat("magic ", absl::Hex(h.magic), " is not OARF"));
  const bool in_region = h.type != FrameType::kError && h.flags == FrameHeader::kInRegion && h.has_payload;
  if (h.flags != 0 && !in_region) return bad(absl::StrCat("flags ", static_cast<int>(h.flags)));
  switch (h.type) {
    case FrameType::kRequest:
      if (!expect_request) return bad("a request where replies were expected");
      if (h.kind >= kNumRpcKinds) return bad(absl::StrCat("unknown RPC kind ", h.kind));
      if (h.meta_len > kMaxMetaBytes) return bad(absl::StrCat("a ", h.meta_len, "-byte header"));
      return absl::OkStatus();
    case FrameType::kReply:
      if (expect_request) return bad("a reply where requests were expected");
      if (h.meta_len > kMaxMetaBytes) return bad(absl::StrCat("a ", h.meta_len, "-byte header"));
      return absl::OkStatus();
    case FrameType::kError:
      if (expect_request) return bad("an error where requests were expected");
      if (h.kind == 0 || h.kind > static_cast<uint8_t>(absl::StatusCode::kUnauthenticated)) {
        return bad(absl::StrCat("unknown status code ", h.kind));
      }
      if (h.meta_len > kMaxErrorTextBytes || h.payload_len > kMaxErrorTextBytes) return bad("an oversized error");
      return absl::OkStatus();
  }
  return bad(absl::StrCat("unknown frame type ", static_cast<int>(h.type)));
}

bool SameToken(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::string& longer = a.size() >= b.size() ? a : b;
  for (size_t i = 0; i < longer.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

}  // namespace oar::rpc::stream
