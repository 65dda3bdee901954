// RingLink: the TCP plumbing of TcpRing (tcp_ring.h) — this rank's
// connection to its successor (sending) and from its predecessor
// (receiving), made and checked once, and one primitive that moves data
// over both at the same time on a Boost.Asio event loop, bounded by a
// deadline:
//
//   Exchange: write `out` to the successor while reading, from the
//   predecessor, a fixed-size header (checked by a callback) and then
//   `in_len` bytes in pieces of up to `chunk`, each piece handed to a
//   callback as it lands (which may add it somewhere, or queue it to be
//   written onward). Ends when every byte went both ways.
//
// Errors name the peer: "rank 2 (10.0.0.3:6170) closed the connection",
// "... sent nothing for 30s".
//
// Thread-safety: used by one thread at a time.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace oar {

struct Piece {
  const char* data;
  size_t size;
};

class RingLink {
 public:
  struct Options {
    int rank = 0;
    std::vector<std::string> endpoints;
    std::string token;
    absl::Duration timeout;
  };
  // Listens on endpoints[rank], connects to the successor (retrying until
  // it listens) and accepts the predecessor, each checked by a handshake
  // (token, ranks, ring size); within options.timeout.
  static absl::StatusOr<std::unique_ptr<RingLink>> Connect(const Options& options);
  ~RingLink();

  int prev() const { return prev_; }
  int next() const { return next_; }
  // "rank 1 (127.0.0.1:6170)"
  std::string Peer(int rank) const;

  using HeaderFn = std::function<absl::Status(const char* header)>;
  // Called for each received piece at byte `offset` of the data; `dst` is
  // where it landed (in_dst + offset, or a scratch buffer when in_dst is
  // null). May call QueueWrite.
  using PieceFn = std::function<absl::Status(size_t offset, const char* dst, size_t size)>;
  absl::Status Exchange(const std::vector<Piece>& out, char* in_header, size_t header_len, const HeaderFn& check,
                        char* in_dst, size_t in_len, size_t chunk, const PieceFn& on_piece, absl::Time deadline);
  // Inside a PieceFn: also write these bytes to the successor, after what
  // is already queued (the memory must stay valid until Exchange returns).
  void QueueWrite(const char* data, size_t size);

 private:
  class Impl;
  RingLink(std::unique_ptr<Impl> impl, int prev, int next, std::vector<std::string> endpoints);
  std::unique_ptr<Impl> impl_;
  int prev_, next_;
  std::vector<std::string> endpoints_;
};

}  // namespace oar
