// ShmBarrier: the rendezvous of the shared-memory collective's ranks —
// processes of one host (or threads, in tests) over one ShmSegment. Its
// control block, at the segment's start, holds each rank's count of
// barriers entered, its PID and whether it has left; a futex word every
// arrival bumps; and a "broken" mark with the reason, set by the rank that
// failed first.
//
// Wait() enters the next barrier and returns once every rank has entered
// it — spinning briefly, then sleeping on the futex. It never waits
// unbounded: it fails (and breaks the barrier for every rank) when the
// timeout passes, naming the ranks and endpoints that did not arrive (and
// recording them in the control block: Late); at
// once when a missing rank's process is gone (SIGKILL) or its communicator
// was destroyed; and with the first failing rank's reason when another
// rank broke it.
//
//   ShmBarrier::Init(segment->data(), n, nonce);              // rank 0, before the others map it
//   ShmBarrier b(segment->data(), {.rank = r, .endpoints = eps, .timeout = t});
//   OAR_RETURN_IF_ERROR(b.Wait("AllReduce", "fc_0.w_0@GRAD"));
//
// Thread-safety: a ShmBarrier is one rank's, used by one thread at a time;
// the control block is shared through atomics (lock-free, so they work
// across processes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace oar {

struct ShmRankOptions {
  int rank = 0;
  std::vector<std::string> endpoints;          // every rank's, for messages
  absl::Duration timeout = absl::Seconds(30);  // each Wait
};

class ShmBarrier {
 public:
  // Bytes of the control block for n ranks (a multiple of 64).
  static size_t Bytes(int n);
  // Lays out a zeroed control block for n ranks at `at`.
  static void Init(char* at, int n, uint64_t nonce);
  // FailedPrecondition unless `at` holds a control block for n ranks made
  // with `nonce`.
  static absl::Status Check(const char* at, int n, uint64_t nonce);

  // Records this process's PID as the rank's.
  ShmBarrier(char* at, ShmRankOptions options);
  // Marks the rank gone and wakes the others: a rank still waiting for it
  // fails at once.
  ~ShmBarrier();
  ShmBarrier(const ShmBarrier&) = delete;
  ShmBarrier& operator=(const ShmBarrier&) = delete;

  // Enters the next barrier and waits for every rank (see above). The error
  // names the peer; the reason the others read also names the operation
  // `what` on tensor `name` and this rank.
  absl::Status Wait(const char* what, const std::string& name);
  // Breaks the barrier for every rank with `why` (the first break wins).
  void Break(const absl::Status& why);
  // FailedPrecondition once broken (by any rank); the error names who and why.
  absl::Status Broken() const;
  // The ranks a wait (any rank's) timed out on, sorted; ranks 64 and up are
  // not recorded.
  std::vector<int> Late() const;
  // "rank R (ENDPOINT)".
  std::string Peer(int rank) const;
  int rank() const { return o_.rank; }
  int size() const { return static_cast<int>(o_.endpoints.size()); }

 private:
  struct Control;
  struct RankState;
  RankState& State(int rank) const;
  // Breaks the barrier with `s` told as `what` on `name` at this rank; returns `s`.
  absl::Status BreakWith(const absl::Status& s, const char* what, const std::string& name);
  bool AllArrived(uint64_t phase) const;
  // The first missing rank that left, or (when `look_up_processes`) whose
  // process is gone; -1 when none.
  int GoneMissing(uint64_t phase, bool look_up_processes, std::string* how) const;

  Control* c_;
  ShmRankOptions o_;
  uint64_t phase_ = 0;  // barriers this rank entered
};

}  // namespace oar
