#include "pserver/resync_gate.h"

#include "absl/strings/str_cat.h"
#include "common/rpc/rpc_client.h"

namespace oar {

ResyncGate::ResyncGate(bool restored, int64_t restored_step, int fanin)
    : restored_(restored), restored_step_(restored_step) {
  for (int t = 0; restored && t < fanin; ++t) unsynced_.insert(t);
}

absl::StatusOr<ResyncGate::Passage> ResyncGate::Check(rpc::RpcKind kind, const rpc::MessageHeader& h, int trainer,
                                                      absl::string_view who) {
  Passage out;
  if (!restored_) return out;
  const bool send = kind == rpc::RpcKind::kSend;
  const uint64_t seq = static_cast<uint64_t>(h.meta.oar_seq());
  absl::MutexLock l(&mu_);
  if (unsynced_.count(trainer)) {
    if (send && h.name() == rpc::kResync && h.meta.oar_replay()) {
      unsynced_.erase(trainer);
      resynced_at_[trainer] = seq;
      out.verdict = Verdict::kCovered;
      out.resynced = true;
      // A trainer past this step's pull (F > S) has the parameters the
      // checkpoint holds.
      out.fetched = h.meta.oar_step() > restored_step_;
      return out;
    }
    if (h.meta.oar_replay() || (send && h.name() == rpc::kComplete)) return out;
    return absl::AbortedError(absl::StrCat(who, " restarted from its checkpoint of step ", restored_step_, ": trainer ",
                                           trainer, " resyncs first"));
  }
  // A gradient or BATCH_BARRIER sent before the trainer's resync, by the
  // same process: the replay carried it, or the checkpoint holds its step.
  auto at = resynced_at_.find(trainer);
  if (send && !h.meta.oar_replay() && at != resynced_at_.end() && seq != 0 &&
      rpc::IncarnationOf(static_cast<int64_t>(seq)) == rpc::IncarnationOf(static_cast<int64_t>(at->second)) &&
      seq < at->second && h.name() != rpc::kFetchBarrier && h.name() != rpc::kComplete) {
    out.verdict = Verdict::kCovered;
  }
  return out;
}

}  // namespace oar
