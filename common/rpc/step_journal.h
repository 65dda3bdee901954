// StepJournal: what a sync trainer has sent each pserver in the step under
// way, so that a pserver restarted from its checkpoint can be brought back
// into the step instead of the job failing.
//
// A sync trainer's step with a pserver is: gradients, BATCH_BARRIER, Gets,
// FETCH_BARRIER. For each (trainer, endpoint) the journal counts the
// FETCH_BARRIERs answered OK (F: the initial pull's, then one per step) and
// holds the gradients of the step under way (sharing their buffers: no
// copy) and whether its BATCH_BARRIER went out; FETCH_BARRIER OK ends the
// step and empties it. An async trainer sends a FETCH_BARRIER only after its
// initial pull, then the same gradients step after step: a name sent twice
// within one step marks (trainer, endpoint) async, and from then on nothing
// is kept for it (else the journal would hold every gradient ever sent).
//
// The protocol with a pserver restored from its checkpoint at step S (the
// optimize passes its state holds): it answers ABORTED to a trainer it has
// not heard from since; that trainer sends RESYNC@RECV carrying F and gets
// S back; when S < F its journaled step is not in the checkpoint and it
// resends it (each message marked oar_replay); then it retries the call.
// The pserver takes a RESYNC trainer with F > S as having pulled step S's
// parameters, and answers calls the trainer made before its RESYNC — sends
// and BATCH_BARRIERs the replay carried, or the checkpoint holds — without
// applying them again. So sync training goes on across the restart, and a
// restart right after a checkpoint loses nothing.
//
// Thread-safety: safe for concurrent use; one Resync per (trainer,
// endpoint) at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/framework/variable.h"

namespace oar::rpc {

class StepJournal {
 public:
  // Records a gradient sent to `ep` (nothing unless the trainer's sync
  // steps with `ep` have begun).
  void AddSend(int64_t trainer, const std::string& ep, const std::string& name, const Variable& var);
  void AddBatchBarrier(int64_t trainer, const std::string& ep);
  // A FETCH_BARRIER to `ep` was answered OK: the step is over.
  void StepDone(int64_t trainer, const std::string& ep);
  // The number of resyncs done with (trainer, ep) so far.
  int64_t Resyncs(int64_t trainer, const std::string& ep);

  // Sends RESYNC@RECV carrying F and returns the pserver's restored step S.
  using ResyncFn = std::function<absl::StatusOr<int64_t>(int64_t fetches)>;
  // Sends one replayed message and waits for it: (name, var or null).
  using SendFn = std::function<absl::Status(const std::string& name, const Variable* var)>;
  // After an ABORTED from `ep`: unless a resync ran since the call started
  // (`resyncs_seen`), resyncs through `resync` and, when the pserver's state
  // lacks the journaled step, replays it through `send`.
  absl::Status Resync(int64_t trainer, const std::string& ep, int64_t resyncs_seen, const ResyncFn& resync,
                      const SendFn& send);

 private:
  struct Journal {
    int64_t fetches = 0;  // FETCH_BARRIERs answered OK
    std::vector<std::pair<std::string, Variable>> sends;
    bool batch_barrier = false;
    bool async = false;  // a variable was sent twice in one step: no steps to replay
    int64_t resyncs = 0;
    absl::Mutex resync_mu;  // one resync at a time
  };
  Journal& Get(int64_t trainer, const std::string& ep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::map<std::pair<int64_t, std::string>, std::unique_ptr<Journal>> journals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oar::rpc
