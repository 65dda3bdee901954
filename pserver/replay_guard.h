// ReplayGuard: makes a pserver apply each (trainer, sequence number) once.
// Clients number their calls (VariableMessage.oar_seq; the high bits are the
// sender's incarnation, see rpc_client.h) and reuse the number on every
// retry; a network may also deliver one message twice. The first arrival
// runs; a duplicate waits (bounded) for the first to finish and gets its
// answer, so a retried gradient is not summed twice and a retried barrier is
// not counted for a later step.
//
//   auto t = guard.Begin(trainer, seq, deadline);
//   if (!t.ok()) return t.status();                 // waited too long for the first
//   if (t->duplicate) return t->first_answer;        // answered as before
//   absl::Status s = Apply(...);
//   guard.End(trainer, seq, s);
//
// An UNAVAILABLE answer (the handler changed nothing and asks for a retry:
// a BATCH_BARRIER that overtook its sends) is given to a copy already
// waiting, but a later copy runs afresh.
//
// seq 0 (Fluid's clients) is never de-duplicated. A new incarnation of a
// trainer (a restarted process) starts a fresh table; a late call of an
// incarnation it replaced gets a fresh ticket and leaves the table alone
// (the pserver refuses an earlier run's gradients and barriers:
// StepBarrier), so it cannot make the new run's retries look new. Each trainer's table
// keeps the last `window` finished numbers; an older number than any kept is
// taken for a duplicate of one that finished (clients wait for every call
// of a step before the next, so a live retry is never that old).
//
// Thread-safety: safe for concurrent use.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pserver/trainer_runs.h"

namespace oar {

class ReplayGuard {
 public:
  ReplayGuard(int fanin, size_t window = 4096);

  struct Ticket {
    bool duplicate = false;
    absl::Status first_answer;  // when duplicate
  };
  // A fresh ticket (the caller must call End) or a duplicate's first answer;
  // DeadlineExceeded when the first is still running at `deadline`.
  absl::StatusOr<Ticket> Begin(int trainer, uint64_t seq, absl::Time deadline);
  // Begin for a caller that must not block: nullopt, having changed
  // nothing, when the first attempt of this number is still running.
  std::optional<Ticket> TryBegin(int trainer, uint64_t seq);
  void End(int trainer, uint64_t seq, const absl::Status& answer);

  int64_t duplicates() const;
  // Whether `seq` comes from `trainer`'s latest run, or none is known yet
  // (not from a restarted process's earlier run); changes nothing.
  bool FromTheLatestRun(int trainer, uint64_t seq) const;

 private:
  struct Entry {
    bool done = false;
    absl::Status answer;
    bool rerun = false;  // done with UNAVAILABLE: the next copy runs afresh
  };

  struct Table {
    TrainerRun run;                     // the incarnation it is for (run.latest()) and those it replaced
    std::map<uint64_t, Entry> entries;  // by counter
    uint64_t evicted_up_to = 0;         // every counter <= this finished and was dropped
    size_t done = 0;
  };

  // The table of `trainer`, renewed for a new incarnation of `seq`; null
  // for an incarnation the table's replaced.
  Table* TableFor(int trainer, uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t window_;
  mutable absl::Mutex mu_;
  std::vector<Table> tables_ ABSL_GUARDED_BY(mu_);
  int64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace oar
