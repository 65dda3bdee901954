// ByteStream: a reliable, ordered byte pipe between two Oar processes — a
// TCP connection (tcp_stream.h) or a pair of shared-memory rings
// (shm_stream.h). The stream protocol (stream_conn.h) is written once
// against it.
//
//   absl::Status s = stream->Write({{hdr, 32}, {payload, n}}, deadline);
//   s = stream->Read(&header, sizeof(header), absl::InfiniteFuture());
//
// Errors name the peer ("tcp 10.0.0.2:6174 closed the connection"). After a
// failed Read or Write the stream's framing is lost: the owner closes it.
//
// Thread-safety: one reader and one writer may use it at the same time (the
// owner serializes writers; reading may pass between threads if the owner
// orders the hand-overs); Close may be called from any thread and wakes
// both.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace oar::rpc::stream {

class SharedRegion;  // shared_region.h

struct ConstPiece {
  const void* data;
  size_t size;
};

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Completes the stream's own setup on the thread that will read it (a
  // server's TLS handshake); OK at once for the others.
  virtual absl::Status Open(absl::Time /*deadline*/) { return absl::OkStatus(); }
  // Reads exactly `n` bytes into `dst`, blocking until they came, the peer
  // closed or failed (Unavailable naming it), Close was called (Cancelled),
  // or `deadline` passed (DeadlineExceeded).
  virtual absl::Status Read(void* dst, size_t n, absl::Time deadline) = 0;
  // Writes every piece, in order, with no copy of them into a staging
  // buffer of ours; blocks until the bytes are handed over, with the same
  // errors as Read.
  virtual absl::Status Write(const std::vector<ConstPiece>& pieces, absl::Time deadline) = 0;
  // Write for a writer with more to write soon: a sleeping peer may be left
  // asleep until Flush, or until this stream next waits to read — a burst
  // of messages then costs the peer one wake-up. (A peer never woken still
  // finds the bytes within its own wait's slice.) Streams whose peer the
  // kernel wakes (TCP) just Write.
  virtual absl::Status WriteMore(const std::vector<ConstPiece>& pieces, absl::Time deadline) {
    return Write(pieces, deadline);
  }
  // Wakes the peer for what WriteMore left unannounced; from any thread.
  virtual void Flush() {}
  // Whether writers should use WriteMore for a burst (it defers wake-ups,
  // and batching them pays on this host): a client for its requests, a
  // server's reader for its replies.
  virtual bool DefersWakeups() const { return false; }
  // Whether reading may pass from thread to thread between frames (the
  // thread that waits for a reply reads it itself) with the two below.
  virtual bool CanWaitReadable() const { return false; }
  // Blocks until a Read would find bytes or learn that the stream ended,
  // Close was called (Cancelled), or `deadline` passed (DeadlineExceeded);
  // consumes nothing. From the reading thread of the moment.
  virtual absl::Status WaitReadable(absl::Time /*deadline*/) {
    return absl::UnimplementedError("this stream is read by one thread");
  }
  // The same, without blocking: whether a Read would find bytes (or the end).
  virtual bool Readable() { return true; }
  // Whether a Write of `n` bytes would hand them all over now, without
  // waiting for the peer to read (false when it cannot tell). A hint: the
  // peer may only make room meanwhile.
  virtual bool WritableNow(size_t /*n*/) { return false; }
  // Lending shared memory (shared_region.h) between two processes on one
  // host: whether this stream can carry a region's fd; one end lends
  // `region` over it (a server its parameters, a client its sends), the
  // other maps what was lent (until `deadline`), and lent_region() is then
  // that mapping (null before, or never), which a read-only view of it
  // keeps alive. Each end lends at most one region.
  virtual bool CanLendRegions() const { return false; }
  virtual absl::Status LendRegion(const SharedRegion& /*region*/) {
    return absl::UnimplementedError("this stream cannot lend shared memory");
  }
  virtual absl::Status MapLentRegion(absl::Time /*deadline*/) {
    return absl::UnimplementedError("this stream cannot lend shared memory");
  }
  virtual std::shared_ptr<const SharedRegion> lent_region() const { return nullptr; }
  // Takes a region the peer lent off the stream unmapped (a loan declined).
  virtual absl::Status DropLentRegion(absl::Time /*deadline*/) { return absl::OkStatus(); }
  // Ends the stream both ways; a blocked Read or Write returns Cancelled.
  virtual void Close() = 0;
  // "tcp 127.0.0.1:6174", "shm 127.0.0.1:6174".
  virtual const std::string& peer() const = 0;
};

}  // namespace oar::rpc::stream
