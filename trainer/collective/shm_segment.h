// ShmSegment: read-write shared memory that the trainer processes of one
// host all map (shm_collective.h). Rank 0 makes it — a memfd, sealed
// against shrinking and growing so no mapper can ever touch a page cut from
// under it (SIGBUS) — and the others open it through rank 0's
// /proc/PID/fd/FD, which works only on the same host, in the same PID
// namespace, for the same user. Nothing is left in /dev/shm or on disk: the
// memory goes when the last process unmaps it.
//
//   auto mine = ShmSegment::Make(bytes);                          // rank 0
//   auto theirs = ShmSegment::Open(pid, fd, bytes);               // the others
//
// Thread-safety: immutable after creation (the bytes are the users'
// business).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"

namespace oar {

class ShmSegment {
 public:
  // `bytes` (> 0) of zeroed shared memory, mapped read-write; fd() is its
  // descriptor until CloseFd().
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Make(size_t bytes);
  // Process `pid`'s segment behind its descriptor `fd`; FailedPrecondition
  // when it cannot be opened (another host or PID namespace, another user)
  // or is not `bytes` long.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Open(pid_t pid, int fd, size_t bytes);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  // Closes the descriptor (once every peer has opened the segment); the
  // mapping stays.
  void CloseFd();

 private:
  ShmSegment(char* data, size_t size, int fd) : data_(data), size_(size), fd_(fd) {}
  char* data_;
  size_t size_;
  int fd_;
};

}  // namespace oar
