// AbortProtocol: how a pserver ends the job when a trainer fails. The
// trainer's ABORT@RECV (its reason, and whose failure it reports:
// VariableMessage.oar_abort_origin) stops the job at once: from then on
// every call of the other trainers is answered with the reason — a
// FAILED_PRECONDITION that names the failed trainer as a typed payload
// (rpc::JobStops) — instead of every process waiting out its deadline for a
// trainer that will not come back. The pserver then lingers: it serves on
// until each live trainer has been answered with the reason (told), at most
// `told_within`, so that none finds the port closed instead; and then until
// each of them has sent its own ABORT in turn (echoed: it stopped, and
// nothing of it waits on this pserver any more), at most `echo_grace`.
//
// Not the job's end: an ABORT from a trainer that had completed (nothing
// waits for it), or, once stopping, a later one (the first reason stays);
// both are answered ALREADY_EXISTS. An ABORT that passes on another
// trainer's failure stops the job as "the job stops, as trainer M heard:
// ...", naming the failed trainer in its payload, not M.
//
// The ParameterServer validates the message (trainer id, the sending
// process's incarnation, the origin's range) and calls Abort; it asks
// Refusal() before serving any call, tells NoteTold what it answered, and
// Linger()s when its loop ends.
//
// Thread-safety: all methods may be called concurrently; aborting() and
// Refusal() on a job that is not stopping take no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace oar {

class AbortProtocol {
 public:
  explicit AbortProtocol(int fanin) : fanin_(fanin) {}

  // Trainer `trainer`'s ABORT with `reason`, reporting trainer `origin`'s
  // failure (`trainer` itself, or the one a pserver told it of);
  // `completed`: `trainer` had completed. OK when it stops the job: `*why`
  // is then the answer every later call gets. ALREADY_EXISTS when it does
  // not (the job was stopping already, or the trainer had completed).
  absl::Status Abort(int trainer, int origin, absl::string_view reason, bool completed, absl::Status* why);

  bool aborting() const { return aborting_.load(std::memory_order_acquire); }
  // OK, or why the job stops (the answer to every call from now on).
  absl::Status Refusal() const;
  // Trainer `trainer` was answered `answer`: a refusal with the reason
  // counts it told. Ids outside [0, fanin) are ignored.
  void NoteTold(int64_t trainer, const absl::Status& answer);
  // Waits, as above, for the trainers not in `completed` (and not the one
  // that failed); returns why the job stopped. Stop() ends the waits.
  absl::Status Linger(const std::set<int>& completed, absl::Duration told_within, absl::Duration echo_grace);
  void Stop();

  // Which trainers were told and which echoed (for tests).
  std::set<int> told() const;
  std::set<int> echoed() const;

 private:
  static constexpr size_t kMaxReason = 2000;
  // Every trainer but the aborter and `completed` is in `who`, or stopped_.
  bool AllIn(const std::set<int>& who, const std::set<int>& completed) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int fanin_;
  mutable absl::Mutex mu_;
  absl::Status why_ ABSL_GUARDED_BY(mu_);  // OK until a trainer's ABORT stops the job
  int aborter_ ABSL_GUARDED_BY(mu_) = -1;
  std::set<int> told_ ABSL_GUARDED_BY(mu_);    // answered why_ since
  std::set<int> echoed_ ABSL_GUARDED_BY(mu_);  // said ABORT since (they stopped)
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> aborting_{false};  // why_ is set (read without the lock)
};

}  // namespace oar
