// Reading and writing the stream protocol's frames (wire.h) on a
// ByteStream: the handshake, messages (header proto + raw payload) and
// errors. Used by both ends (stream_server.h, stream_transport.h).
//
// Reading keeps two kinds of failure apart: the stream's (it broke, or
// framing was lost: the connection must be dropped) and the message's (a
// header that does not parse or check: answered, and its payload skipped,
// while the connection goes on).
//
// Thread-safety: functions; callers serialize the writers of one stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/message.h"
#include "common/rpc/stream/byte_stream.h"
#include "common/rpc/stream/received_message.h"
#include "common/rpc/stream/shared_region.h"
#include "common/rpc/stream/wire.h"

namespace oar::rpc::stream {

// How long a peer may stall in the middle of a frame, a handshake or a
// reply before the connection is given up: `io_timeout` (the transport's
// RpcOptions::deadline_ms) from now.
absl::Time IoDeadline(absl::Duration io_timeout);
inline constexpr absl::Duration kDefaultIoTimeout = absl::Milliseconds(180000);

// Client side of the handshake: sends the token, waits for the verdict.
// Unauthenticated (the server's text) when the token was refused. Over a
// stream that can (CanLendRegions) and with `map_server_region`
// (RpcOptions::shm_lend_params), asks for the server's region and maps what
// it lends (ByteStream::lent_region).
// `own` (may be null): offered to the server over such a stream (Hello
// kLendsRegion); `*server_maps` (may be null) says whether it took it, so
// that requests may name offsets in it.
absl::Status ClientHandshake(ByteStream* s, const std::string& token, absl::Time deadline,
                             const SharedRegion* own = nullptr, bool* server_maps = nullptr,
                             bool map_server_region = true);
// Server side: reads the Hello, checks version and token, answers.
// Unauthenticated (after telling the client) when the token is wrong.
// `region` (may be null): lent to a client that asks, over a stream that
// can; `*lent` (may be null) then says it was. `map_client_region`: a
// region the client offers is mapped (ByteStream::lent_region), and its
// requests may then name offsets in it (ServerOptions::map_lent_sends);
// otherwise one offered is taken off the stream unmapped.
absl::Status ServerHandshake(ByteStream* s, const std::string& token, absl::Time deadline,
                             const SharedRegion* region = nullptr, bool* lent = nullptr,
                             bool map_client_region = false);

// Writes one message frame: `h`'s proto and `var`'s payload (read in place).
// `more`: the writer has more to write soon (ByteStream::WriteMore).
// `region` (may be null): the region this end lent the peer (a server's
// to a client that mapped it; a client's own, which the server mapped), and
// the writer vouches that the payload, if it lies there, is not written
// before the peer is done with it (rpc::Reply::stable for replies;
// OutgoingMessage::lend_payload with the server's ServerOptions::
// map_lent_sends for requests): then only its offset is sent.
absl::Status WriteMessage(ByteStream* s, FrameType type, uint8_t kind, uint64_t call_id, uint32_t timeout_ms,
                          const MessageHeader& h, const Variable* var, absl::Time deadline, bool more = false,
                          const SharedRegion* region = nullptr);
// Writes an error frame answering `call_id`.
absl::Status WriteError(ByteStream* s, uint64_t call_id, const absl::Status& error, absl::Time deadline);

struct ReadResult {
  absl::Status stream;  // not OK: drop the connection
  // When `stream` is OK: the message, or why it was refused (its payload
  // was skipped).
  absl::StatusOr<std::unique_ptr<ReceivedMessage>> message = absl::UnknownError("unread");
};

// Where an admitted message's payload goes: a buffer from the pool, or
// (`tensor` set) straight into that tensor's own buffer, which the admitter
// checked holds exactly the payload's dtype and byte size and is shared by
// no other tensor; that read must end by `deadline` too.
//
// `view`: a payload in the lent region (kInRegion) becomes a read-only view
// of it (Tensor::OverReadOnlyMemory, keeping the mapping alive) rather than
// a copy; `tensor` is then left alone.
struct Destination {
  Tensor* tensor = nullptr;
  absl::Time deadline = absl::InfiniteFuture();
  bool view = false;
};

// Called with the checked header before any payload byte is read or
// buffer allocated; an error refuses the message (its payload is skipped).
using Admit = std::function<absl::StatusOr<Destination>(const MessageHeader&)>;

// Reads the rest of a message frame whose FrameHeader `f` was read and
// checked (CheckFrame): its proto, then — if `admit` agrees — its payload
// into where `admit` said: off the stream, or (kInRegion) out of the
// region the peer lent this end, or as a view of it (Destination::view),
// from an offset checked to lie inside it (a message error otherwise; the
// stream goes on).
ReadResult ReadMessage(ByteStream* s, const FrameHeader& f, const Admit& admit, const std::shared_ptr<BufferPool>& pool,
                       absl::Time deadline);
// Reads an error frame's text: the status it carries.
absl::Status ReadError(ByteStream* s, const FrameHeader& f, absl::Status* error, absl::Time deadline);
// Reads and drops `n` bytes.
absl::Status Skip(ByteStream* s, uint64_t n, absl::Time deadline);

}  // namespace oar::rpc::stream
