// ShmRing: a single-producer, single-consumer byte ring in memory shared
// between two processes (a memfd both have mapped; shm_stream.h). The
// producer copies bytes in and publishes them every publish_bytes_, so the
// consumer copies a large message out on the other core while the rest is
// still going in. An empty (full) ring is waited on by spinning briefly
// (`spin_us`; RpcOptions::shm_spin_us), then sleeping on a futex in the shared page that the other side bumps and
// wakes only when a waiter said so — no system call while both keep pace.
//
// Sleeps are sliced (kSliceMs) so that the owner's `check` (is the peer
// alive?) and the deadline are looked at even when nobody wakes us — which
// also bounds what a wake-up never paid can cost: a sleeping consumer finds
// published bytes within one slice.
//
// A producer with more to write soon may defer the wake-up of a message
// that fits in the room left (Write's `defer_wake`): a sleeping consumer is
// then woken by WakeDeferred, so a burst of messages costs it one wake-up,
// not one (or one per publication) each. A larger message wakes it as usual
// (to be read while it is written), and a producer never waits for room
// while it owes the consumer a wake-up; nor does a side that owes the other
// direction's (PayBeforeWaiting).
//
// Thread-safety: one producer thread and one consumer thread at a time (the
// owner serializes each side); WakeDeferred and Close from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/rpc/stream/byte_stream.h"

namespace oar::rpc::stream {

class ShmRing {
 public:
  // Bytes copied in between two publications: a sixteenth of the ring, at
  // most 256 KiB, so that many chunks are in flight at once.
  static constexpr size_t kMaxPublishBytes = 256 * 1024;
  static constexpr int kSliceMs = 50;
  // Bytes of shared memory a ring of `capacity` data bytes takes.
  static size_t BytesFor(size_t capacity);

  // A ring over `memory` (BytesFor(capacity) bytes, 64-byte aligned). The
  // creator passes init = true once, before the peer maps it. `spin_us`:
  // how long a wait spins before it sleeps (-1: SpinMicros' default).
  ShmRing(void* memory, size_t capacity, bool init, int spin_us = -1);

  // Returns OK to go on waiting, or why not (the peer is gone).
  using Check = std::function<absl::Status()>;
  // `defer_wake`: leave a sleeping consumer asleep (until WakeDeferred) if
  // the message fits in the room left.
  absl::Status Write(const std::vector<ConstPiece>& pieces, absl::Time deadline, const Check& check,
                     bool defer_wake = false);
  absl::Status Read(void* dst, size_t n, absl::Time deadline, const Check& check);
  // The consumer's: waits until there are bytes to read (or the ring was
  // closed), consuming none; and the same without waiting.
  absl::Status WaitReadable(absl::Time deadline, const Check& check);
  bool Readable() const;
  // The producer's: bytes it could write now without waiting.
  size_t Writable() const;
  // Wakes the consumer if a Write deferred its wake-up since the last call
  // (and it sleeps); cheap when nothing was deferred.
  void WakeDeferred();
  bool wake_deferred() const { return wake_owed_.load(std::memory_order_acquire); }
  // Before any wait on this ring, `other` (this side's ring the other way)
  // pays its deferred wake-up: the peer may be asleep on exactly those
  // bytes. Set once, before use.
  void PayBeforeWaiting(ShmRing* other) { pay_first_ = other; }
  // Marks the ring closed and wakes both sides; their waits return Cancelled.
  void Close();

 private:
  struct Control;
  // Waits until `ready()` or the deadline, the check or Close says stop.
  absl::Status WaitFor(std::atomic<uint32_t>* word, std::atomic<uint32_t>* waiting, const std::function<bool()>& ready,
                       absl::Time deadline, const Check& check, const char* doing);
  static void Wake(std::atomic<uint32_t>* word, std::atomic<uint32_t>* waiting);

  Control* control_;
  char* data_;
  size_t capacity_;
  size_t publish_bytes_;
  int spin_us_;
  std::atomic<bool> wake_owed_{false};  // this process's producer deferred a wake-up
  ShmRing* pay_first_ = nullptr;
};

}  // namespace oar::rpc::stream
