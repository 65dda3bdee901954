// SharedRegion: memory one end of a shared-memory connection on this host
// (shm_stream.h) lends the other, read-only — a sync pserver's parameters,
// so that a Get's reply names where the value lies instead of carrying it:
// the trainer copies it once, straight out of the pserver's own tensor,
// where the ring path copied it twice (into the ring, then out of it), and
// the pserver copies nothing after its optimize pass; and the other way a
// trainer's gradients (lent_sends.h), which the pserver reads in place.
//
// The region is a memfd sealed against shrinking and growing, so a reader
// can never touch a page that was cut from under it (SIGBUS). The lender
// maps it read-write; a borrower gets a read-only descriptor of it (the
// kernel then refuses it a writable mapping, or mprotect to one), maps it
// read-only and reads only ranges it checked lie inside (At). The fd
// travels over the shm stream's Unix socket (SCM_RIGHTS) during the
// handshake (frame_io.h).
//
// What makes reading it safe is the lender's to guarantee: it names a
// range only when nothing writes that range before the borrower is done
// with it (rpc::Reply::stable for a server's replies;
// OutgoingMessage::lend_payload and ServerOptions::map_lent_sends for a
// client's requests).
//
//   OAR_ASSIGN_OR_RETURN(auto region, SharedRegion::MoveInto({&w, &b}));   // w, b now live in it
//   int64_t off = region->OffsetOf(w.raw_data(), w.nbytes());              // -1 if not inside
//
// Thread-safety: immutable after creation (the bytes are the tensors'
// business); safe to share between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/framework/tensor.h"

namespace oar::rpc::stream {

class SharedRegion {
 public:
  // Lender: `bytes` (> 0) of zeroed shared memory, mapped read-write;
  // `name` shows in /proc/PID/maps. Pages take memory once written.
  static absl::StatusOr<std::shared_ptr<SharedRegion>> Create(size_t bytes, const char* name = "oar-lent-params");
  // Lender: a region holding every tensor of `tensors` (initialized dense
  // host tensors), each copied in and re-seated over its copy (the region
  // stays alive while any of them holds it). Their next writes land in the
  // region for as long as they keep that buffer (Tensor::mutable_data).
  static absl::StatusOr<std::shared_ptr<SharedRegion>> MoveInto(const std::vector<Tensor*>& tensors);
  // Borrower: maps the region behind `fd` (closed here in any case)
  // read-only; InvalidArgument naming `lender` when it is not sealed
  // against shrinking or has no pages, Unavailable when it cannot be
  // mapped.
  static absl::StatusOr<std::shared_ptr<const SharedRegion>> Map(int fd, const std::string& lender);
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  size_t size() const { return size_; }
  // The lender's read-only descriptor, what borrowers get; -1 for a borrower.
  int lend_fd() const { return lend_fd_; }
  // Where [p, p + n) lies in the region, or -1 when not wholly inside it.
  int64_t OffsetOf(const void* p, size_t n) const;
  // The n bytes at `offset`, or null when they are not wholly inside the
  // region (overflow-checked: a peer's numbers).
  const char* At(uint64_t offset, uint64_t n) const;
  // The lender's: the same, writable; null for a borrower.
  char* WritableAt(uint64_t offset, uint64_t n) { return lend_fd_ >= 0 ? const_cast<char*>(At(offset, n)) : nullptr; }

 private:
  SharedRegion(char* data, size_t size, int lend_fd) : data_(data), size_(size), lend_fd_(lend_fd) {}
  char* data_;
  size_t size_;
  int lend_fd_;
};

// Passes `region`'s read-only fd over the connected Unix socket `socket`.
absl::Status SendRegion(int socket, const SharedRegion& region);
// Receives a region sent by SendRegion on `socket` and maps it; waits
// until `deadline` for it. Unavailable, naming `lender` and what the user
// can do, when nothing usable came or it cannot be mapped.
absl::StatusOr<std::shared_ptr<const SharedRegion>> ReceiveRegion(int socket, const std::string& lender,
                                                                  absl::Time deadline);
// Receives such a region and closes it unmapped: a loan declined, so that
// its fd does not sit in the socket for the connection's life.
absl::Status DiscardRegion(int socket, const std::string& lender, absl::Time deadline);

}  // namespace oar::rpc::stream
