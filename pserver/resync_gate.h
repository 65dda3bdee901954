// ResyncGate: what a sync pserver restored from its checkpoint while the job
// runs on lets through, until each trainer has resynced with it
// (rpc/step_journal.h has the trainer's side). A trainer it has not heard
// from since the restart is answered ABORTED (resync first) to every call
// but its replay (oar_replay messages: the step the checkpoint lacks) and
// COMPLETE; its RESYNC@RECV carrying F (FETCH_BARRIERs it has had answered)
// is answered with the restored step S, and a trainer with F > S counts as
// having pulled step S's parameters. After its resync, a gradient or
// BATCH_BARRIER the trainer sent before it (same process, a lower sequence
// number) is answered OK without being applied: the replay carried it, or
// the checkpoint holds its step.
//
// A pserver that was not restored, or an async one, lets everything through.
//
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/rpc/message.h"
#include "common/rpc/rpc_common.h"

namespace oar {

class ResyncGate {
 public:
  // `restored`: a sync pserver restored at `restored_step` optimize passes,
  // its `fanin` trainers yet to resync. Else: a gate that lets all through.
  ResyncGate(bool restored, int64_t restored_step, int fanin);

  enum class Verdict {
    kServe,    // handle the call as usual
    kCovered,  // answer it OK without applying it
  };
  struct Passage {
    Verdict verdict = Verdict::kServe;
    // This call was the trainer's RESYNC: it counts as fetched when
    // `fetched`, and its reply carries `restored_step`.
    bool resynced = false;
    bool fetched = false;
  };
  // ABORTED ("`who` restarted from its checkpoint of step S: trainer N
  // resyncs first") for a call the trainer must not make yet.
  absl::StatusOr<Passage> Check(rpc::RpcKind kind, const rpc::MessageHeader& h, int trainer, absl::string_view who);

  bool restored() const { return restored_; }
  int64_t restored_step() const { return restored_step_; }

 private:
  const bool restored_;
  const int64_t restored_step_;
  absl::Mutex mu_;
  std::set<int> unsynced_ ABSL_GUARDED_BY(mu_);               // trainers yet to resync
  std::map<int, uint64_t> resynced_at_ ABSL_GUARDED_BY(mu_);  // their RESYNC's sequence number
};

}  // namespace oar
