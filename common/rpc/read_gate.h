// ReadGate: bounds how many large requests a server holds in memory at once.
//
// A gRPC server reads a request whole before its handler runs, so a pserver
// that N trainers each push K blocks to would otherwise hold N×K messages at
// once, however few handler threads drain them. The gate hands out `slots`
// reads: a call that finds none free is parked without reading its body
// (HTTP/2 flow control then holds the bytes on the sender's side), and starts
// when a slot is given back. A request found small once read (a barrier, a
// notification: under kSmallRequestBytes) gives its slot back at once, so
// calls that wait in their handler for other trainers never pin slots; a
// parked call waits only for large requests being read or served, and a
// pserver's gradient handler waits at most for the optimize pass in progress
// (StepBarrier::BeginReceive), so parking cannot deadlock a step. Parked
// calls are started oldest first; a cancelled one (its deadline passed, the
// server shuts down) leaves the queue.
//
// Thread-safety: every method may be called concurrently; `start` runs on the
// calling thread, outside the gate's lock.
#pragma once

#include <cstdint>
#include <functional>
#include <list>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace oar::rpc {

class ReadGate {
 public:
  static constexpr uint64_t kSmallRequestBytes = 64 * 1024;

  // `slots` <= 0: unbounded (every Enter starts at once).
  explicit ReadGate(int slots) : slots_(slots) {}

  // Takes a slot and runs `start`, or parks `start` under `key` (the
  // caller's address; unique while it lives) until Leave frees one.
  void Enter(const void* key, std::function<void()> start);
  // Gives a slot back; starts the oldest parked call, if any.
  void Leave();
  // Removes a parked call: true when it was still parked (its `start` will
  // never run and it holds no slot), false when it already started.
  bool Cancel(const void* key);

  int slots() const { return slots_; }
  int parked() const;

 private:
  struct Parked {
    const void* key;
    std::function<void()> start;
  };
  const int slots_;
  mutable absl::Mutex mu_;
  int in_use_ ABSL_GUARDED_BY(mu_) = 0;
  std::list<Parked> parked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oar::rpc
