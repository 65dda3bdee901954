// The stream protocol's bytes: what Oar's own transports (TCP and shared
// memory, stream_transport.h) write on a connection. gRPC's service stays
// Fluid's; this is only spoken between two Oar processes that agreed on it
// (transport_select.h).
//
// A connection opens with a handshake:
//   client → server  Hello   {magic "OARH", version, token length} + token
//   server → client  Welcome {magic "OARW", status code, text length} + text
// and then carries frames both ways, each a fixed 32-byte FrameHeader, then
// `meta_len` bytes, then `payload_len` bytes:
//   request  meta = the VariableMessage without `serialized` (name, dtype,
//            dims, LoD, rows, trainer_id, oar_seq, ...), payload = the
//            tensor's raw bytes, read straight from its memory on send;
//   reply    the same for the answer of call `call_id`;
//   error    `code` an absl::StatusCode, meta = the error's text, payload =
//            its typed facts (status_payloads.h; version 2 on).
// Over shared memory a server may lend a region (shared_region.h) to a
// client that asks (Hello kMapsRegions; Welcome kLentRegion: the region's
// fd was sent on the stream's socket before the Welcome). A reply may then
// leave its payload there (FrameHeader kInRegion): instead of the payload
// bytes, 8 bytes follow meta — the payload's offset in the region — and
// the server vouches that nothing writes those bytes before the client has
// read the reply (rpc::Reply::stable).
// The other way, a client may lend a region of its own (Hello kLendsRegion:
// its fd was sent on the socket before the Hello) to a server that takes
// it (Welcome kMapsClientRegion). A request may then leave its payload
// there (kInRegion, an offset in the client's region), and the client
// vouches that it writes those bytes again only after the server is done
// with them (OutgoingMessage::lend_payload; the server takes such regions
// only where its protocol makes that so: ServerOptions::map_lent_sends).
// Calls are multiplexed by call_id: many in flight per connection, replies
// in any order. Integers are little-endian (x86-64 and arm64 both are).
//
// Thread-safety: plain data and pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/rpc/rpc_common.h"

namespace oar::rpc::stream {

// Four characters as they appear on the wire.
constexpr uint32_t Magic(char a, char b, char c, char d) {
  return static_cast<uint32_t>(static_cast<uint8_t>(a)) | static_cast<uint32_t>(static_cast<uint8_t>(b)) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(c)) << 16 | static_cast<uint32_t>(static_cast<uint8_t>(d)) << 24;
}
inline constexpr uint32_t kHelloMagic = Magic('O', 'A', 'R', 'H');
inline constexpr uint32_t kWelcomeMagic = Magic('O', 'A', 'R', 'W');
inline constexpr uint32_t kFrameMagic = Magic('O', 'A', 'R', 'F');
inline constexpr uint16_t kVersion = 2;  // 2: error frames carry the status's payloads
inline constexpr uint32_t kMaxTokenBytes = 4096;
inline constexpr uint32_t kMaxErrorTextBytes = 64 * 1024;
// Header protos carry names, dims, LoD and SelectedRows row ids (8 bytes
// each): generous, but bounded before anything is allocated.
inline constexpr uint32_t kMaxMetaBytes = 256u << 20;

struct Hello {
  static constexpr uint16_t kMapsRegions = 1;  // the client maps a region the server lends
  static constexpr uint16_t kLendsRegion = 2;  // the client's own region's fd is on the socket
  uint32_t magic = kHelloMagic;
  uint16_t version = kVersion;
  uint16_t flags = 0;
  uint32_t token_len = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(Hello) == 16);

struct Welcome {
  uint32_t magic = kWelcomeMagic;
  uint32_t code = 0;  // absl::StatusCode; 0 = accepted
  uint32_t text_len = 0;
  uint32_t flags = 0;                               // kLentRegion, kMapsClientRegion
  static constexpr uint32_t kLentRegion = 1;        // the region's fd is on the socket
  static constexpr uint32_t kMapsClientRegion = 2;  // the server mapped the client's region
};
static_assert(sizeof(Welcome) == 16);

enum class FrameType : uint8_t { kRequest = 1, kReply = 2, kError = 3 };

struct FrameHeader {
  // The payload lies in the region the sender lent (a reply: the server's;
  // a request: the client's); its offset there follows meta.
  static constexpr uint8_t kInRegion = 1;
  uint32_t magic = kFrameMagic;
  FrameType type = FrameType::kRequest;
  uint8_t kind = 0;         // requests: RpcKind; errors: absl::StatusCode
  uint8_t has_payload = 0;  // the VariableMessage had a `serialized` field
  uint8_t flags = 0;        // kInRegion
  uint64_t call_id = 0;
  uint32_t meta_len = 0;
  uint32_t timeout_ms = 0;  // requests: how long the caller still waits (0: unbounded)
  uint64_t payload_len = 0;
};
static_assert(sizeof(FrameHeader) == 32);

// Checks what a frame header claims before anything is read or allocated
// for it: the magic, a known type (`expect_request`: a server takes only
// requests, a client only replies and errors), a known RpcKind or status
// code, meta_len within kMaxMetaBytes (kMaxErrorTextBytes for errors), no
// flags but kInRegion on a request or reply with a payload.
// InvalidArgument naming `peer` otherwise; the connection cannot be read
// further then (its framing is lost).
absl::Status CheckFrame(const FrameHeader& h, bool expect_request, const std::string& peer);

// Constant-time comparison of auth tokens.
bool SameToken(const std::string& a, const std::string& b);

}  // namespace oar::rpc::stream
