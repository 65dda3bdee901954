#include "pserver/abort_protocol.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/rpc/status_payloads.h"

namespace oar {

absl::Status AbortProtocol::Abort(int trainer, int origin, absl::string_view reason, bool completed,
                                  absl::Status* why) {
  std::string said(reason.substr(0, kMaxReason));
  if (said.empty()) said = "it gave no reason";
  absl::MutexLock l(&mu_);
  if (aborting()) {  // already stopping: this trainer knows (and says nothing of stopping it)
    told_.insert(trainer);
    echoed_.insert(trainer);
    return absl::AlreadyExistsError(absl::StrCat("was already stopping: ", why_.message()));
  }
  if (completed) {  // it had done its part: the others go on
    return absl::AlreadyExistsError(absl::StrCat("trainer ", trainer, " had completed; the job goes on"));
  }
  why_ =
      rpc::JobStops(origin, origin == trainer ? absl::StrCat("trainer ", trainer, " failed, so the job stops: ", said)
                                              : absl::StrCat("the job stops, as trainer ", trainer, " heard: ", said));
  aborter_ = trainer;
  aborting_.store(true, std::memory_order_release);
  *why = why_;
  return absl::OkStatus();
}

absl::Status AbortProtocol::Refusal() const {
  if (!aborting()) return absl::OkStatus();
  absl::MutexLock l(&mu_);
  return why_;
}

void AbortProtocol::NoteTold(int64_t trainer, const absl::Status& answer) {
  if (answer.ok() || !aborting() || trainer < 0 || trainer >= fanin_) return;
  absl::MutexLock l(&mu_);
  told_.insert(static_cast<int>(trainer));
}

bool AbortProtocol::AllIn(const std::set<int>& who, const std::set<int>& completed) const {
  if (stopped_) return true;
  for (int t = 0; t < fanin_; ++t) {
    if (t != aborter_ && !completed.count(t) && !who.count(t)) return false;
  }
  return true;
}

absl::Status AbortProtocol::Linger(const std::set<int>& completed, absl::Duration told_within,
                                   absl::Duration echo_grace) {
  absl::MutexLock l(&mu_);
  struct Waiting {
    const AbortProtocol* p;
    const std::set<int>* who;
    const std::set<int>* completed;
    bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return p->AllIn(*who, *completed); }  // under mu_
  };
  Waiting all_told{this, &told_, &completed}, all_echoed{this, &echoed_, &completed};
  const absl::Time deadline = absl::Now() + told_within;
  if (mu_.AwaitWithDeadline(absl::Condition(&all_told), deadline)) {
    mu_.AwaitWithDeadline(absl::Condition(&all_echoed), std::min(deadline, absl::Now() + echo_grace));
  }
  return why_;
}

void AbortProtocol::Stop() {
  absl::MutexLock l(&mu_);
  stopped_ = true;
}

std::set<int> AbortProtocol::told() const {
  absl::MutexLock l(&mu_);
  return told_;
}

std::set<int> AbortProtocol::echoed() const {
  absl::MutexLock l(&mu_);
  return echoed_;
}

}  // namespace oar
