// ParameterServer and a trainer that failed: the trainer's ABORT@RECV (its
// reason in out_varname) ends the job here at once — the barrier's waits
// and parked Gets, and every later call of the other trainers, are answered
// "trainer N failed, so the job stops: <reason>" — instead of every process
// waiting out FLAGS_rpc_deadline for a trainer that will not come back. Run
// then serves on (LingerAfterAbort) until each live trainer has been
// answered with the reason (at its next call, or its waiting one), at most
// FLAGS_rpc_deadline, so that none finds the port closed instead; and then
// until each of them has said ABORT in turn (a trainer that heard the
// reason stops and echoes it), at most abort_echo_grace_ms: calls a
// trainer sent before it read the answer (the rest of its step's sends)
// are answered with the reason too, rather than finding the port closed.
//
// Not the job's end: an ABORT from a trainer that had completed (nothing
// waits for it; answered ALREADY_EXISTS), or, once the job is stopping, a
// later one (the first reason stays; ALREADY_EXISTS with it). Refused: one
// from a process of that trainer id that a later one replaced (its sequence
// numbers' incarnation is not the latest the pserver has seen). An ABORT
// whose reason is another pserver's "trainer N failed, so the job stops"
// (the trainer heard it and stopped) stops the job as "the job stops, as
// trainer M heard: ...", not naming M as the one that failed.
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/rpc_client.h"
#include "glog/logging.h"
#include "pserver/parameter_server.h"

namespace oar {

absl::Status ParameterServer::HandleAbort(const rpc::MessageHeader& h, int id) {
  if (!guard_->FromTheLatestRun(id, static_cast<uint64_t>(h.meta.oar_seq()))) {
    return absl::FailedPreconditionError(absl::StrCat(Name(), ": an ABORT from an earlier process of trainer ", id,
                                                      ", since replaced; the job goes on"));
  }
  // A trainer that stopped because another pserver told it the job stops
  // echoes that: it did not fail, it passes on who did.
  const bool echo = absl::StrContains(h.meta.out_varname(), rpc::kJobStops);
  std::string reason = h.meta.out_varname().substr(0, kMaxAbortReason);
  if (reason.empty()) reason = "it gave no reason";
  absl::Status why =
      absl::FailedPreconditionError(echo ? absl::StrCat("the job stops, as trainer ", id, " heard: ", reason)
                                         : absl::StrCat("trainer ", id, " failed", rpc::kJobStops, reason));
  {
    absl::MutexLock l(&state_mu_);
    if (!aborted_.ok()) {  // already stopping: this trainer knows (and says nothing of stopping it)
      told_.insert(id);
      echoed_.insert(id);
      return absl::AlreadyExistsError(absl::StrCat(Name(), " was already stopping: ", aborted_.message()));
    }
    if (completed_.count(id)) {  // it had done its part: the others go on
      return absl::AlreadyExistsError(absl::StrCat(Name(), ": trainer ", id, " had completed; the job goes on"));
    }
    aborted_ = why;
    aborter_ = id;
    aborting_.store(true, std::memory_order_release);  // under the lock: RunAsync may wake as it is released
  }
  LOG(ERROR) << Name() << ": " << why.message();
  if (barrier_) barrier_->End(why);  // every wait and parked Get hears why
  return absl::OkStatus();
}

absl::Status ParameterServer::RefuseIfAborted(int id) {
  if (!aborting_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock l(&state_mu_);
  return aborted_;  // Handle's NoteTold counts the trainer told
}

void ParameterServer::NoteTold(int64_t id, const absl::Status& answer) {
  if (answer.ok() || !aborting_.load(std::memory_order_acquire)) return;
  absl::MutexLock l(&state_mu_);
  if (id >= 0 && id < config_.fanin) told_.insert(static_cast<int>(id));  // a wait or parked Get that End answered
}

absl::Status ParameterServer::LingerAfterAbort() {
  absl::MutexLock l(&state_mu_);
  struct AllIn {  // every live trainer is in `who` (or the pserver was stopped)
    ParameterServer* ps;
    const std::set<int>* who;
    bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (ps->stopped_) return true;
      for (int t = 0; t < ps->config_.fanin; ++t) {
        if (t != ps->aborter_ && !ps->completed_.count(t) && !who->count(t)) return false;
      }
      return true;
    }
  };
  AllIn all_told{this, &told_}, all_echoed{this, &echoed_};
  const absl::Time deadline = absl::Now() + absl::Milliseconds(config_.timeout_ms);
  if (state_mu_.AwaitWithDeadline(absl::Condition(&all_told), deadline)) {
    const absl::Duration grace = absl::Milliseconds(config_.abort_echo_grace_ms);
    state_mu_.AwaitWithDeadline(absl::Condition(&all_echoed), std::min(deadline, absl::Now() + grace));
  }
  return aborted_;
}

}  // namespace oar
