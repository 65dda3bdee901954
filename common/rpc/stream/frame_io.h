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
#include "common/rpc/message.h"
#include "common/rpc/stream/byte_stream.h"
#include "common/rpc/stream/received_message.h"
#include "common/rpc/stream/wire.h"

namespace oar::rpc::stream {

// How long a peer may stall in the middle of a frame, a handshake or a
// reply before the connection is given up: FLAGS_rpc_deadline from now.
absl::Time IoDeadline();

// Client side of the handshake: sends the token, waits for the verdict.
// Unauthenticated (the server's text) when the token was refused.
absl::Status ClientHandshake(ByteStream* s, const std::string& token, absl::Time deadline);
// Server side: reads the Hello, checks version and token, answers.
// Unauthenticated (after telling the client) when the token is wrong.
absl::Status ServerHandshake(ByteStream* s, const std::string& token, absl::Time deadline);

// Writes one message frame: `h`'s proto and `var`'s payload (read in place).
// `more`: the writer has more to write soon (ByteStream::WriteMore).
absl::Status WriteMessage(ByteStream* s, FrameType type, uint8_t kind, uint64_t call_id, uint32_t timeout_ms,
                          const MessageHeader& h, const Variable* var, absl::Time deadline, bool more = false);
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
struct Destination {
  Tensor* tensor = nullptr;
  absl::Time deadline = absl::InfiniteFuture();
};

// Called with the checked header before any payload byte is read or
// buffer allocated; an error refuses the message (its payload is skipped).
using Admit = std::function<absl::StatusOr<Destination>(const MessageHeader&)>;

// Reads the rest of a message frame whose FrameHeader `f` was read and
// checked (CheckFrame): its proto, then — if `admit` agrees — its payload
// into where `admit` said.
ReadResult ReadMessage(ByteStream* s, const FrameHeader& f, const Admit& admit, const std::shared_ptr<BufferPool>& pool,
                       absl::Time deadline);
// Reads an error frame's text: the status it carries.
absl::Status ReadError(ByteStream* s, const FrameHeader& f, absl::Status* error, absl::Time deadline);
// Reads and drops `n` bytes.
absl::Status Skip(ByteStream* s, uint64_t n, absl::Time deadline);

}  // namespace oar::rpc::stream
