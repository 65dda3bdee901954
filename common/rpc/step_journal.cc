#include "common/rpc/step_journal.h"

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/rpc/rpc_common.h"
#include "glog/logging.h"

namespace oar::rpc {

StepJournal::Journal& StepJournal::Get(int64_t trainer, const std::string& ep) {
  auto& j = journals_[{trainer, ep}];
  if (j == nullptr) j = std::make_unique<Journal>();
  return *j;
}

void StepJournal::AddSend(int64_t trainer, const std::string& ep, const std::string& name, const Variable& var) {
  absl::MutexLock l(&mu_);
  Journal& j = Get(trainer, ep);
  if (j.fetches == 0 || j.async) return;
  for (const auto& [sent, unused] : j.sends) {
    if (sent != name) continue;
    j.async = true;  // a sync step sends each variable once
    j.sends.clear();
    j.batch_barrier = false;
    return;
  }
  j.sends.emplace_back(name, var);
}

void StepJournal::AddBatchBarrier(int64_t trainer, const std::string& ep) {
  absl::MutexLock l(&mu_);
  Journal& j = Get(trainer, ep);
  if (j.fetches > 0) j.batch_barrier = true;
}

void StepJournal::StepDone(int64_t trainer, const std::string& ep) {
  absl::MutexLock l(&mu_);
  Journal& j = Get(trainer, ep);
  ++j.fetches;
  j.sends.clear();
  j.batch_barrier = false;
}

int64_t StepJournal::Resyncs(int64_t trainer, const std::string& ep) {
  absl::MutexLock l(&mu_);
  return Get(trainer, ep).resyncs;
}

absl::Status StepJournal::Resync(int64_t trainer, const std::string& ep, int64_t resyncs_seen, const ResyncFn& resync,
                                 const SendFn& send) {
  Journal* j;
  {
    absl::MutexLock l(&mu_);
    j = &Get(trainer, ep);
  }
  absl::MutexLock one(&j->resync_mu);
  int64_t fetches;
  std::vector<std::pair<std::string, Variable>> sends;
  bool batch;
  {
    absl::MutexLock l(&mu_);
    if (j->resyncs > resyncs_seen) return absl::OkStatus();  // resynced since the call started: retry it
    fetches = j->fetches;
    sends = j->sends;
    batch = j->batch_barrier;
  }
  OAR_ASSIGN_OR_RETURN(const int64_t restored, resync(fetches));
  const bool replay = restored < fetches;  // the checkpoint lacks the journaled step
  if (fetches == 0) {  // this trainer has not pulled yet: a new job resumes from the pserver's checkpoint
    LOG(INFO) << "pserver " << ep << " holds a checkpoint of step " << restored << ": trainer " << trainer
              << " starts from it";
  } else {
    LOG(WARNING) << "pserver " << ep << " restarted at step " << restored << "; trainer " << trainer << " is at step "
                 << fetches - 1
                 << (replay
                         ? absl::StrCat(": resending ", sends.size(), " gradient(s)", batch ? " and BATCH_BARRIER" : "")
                         : ": nothing to resend");
  }
  for (const auto& [name, var] : replay ? sends : decltype(sends){}) {
    if (absl::Status s = send(name, &var); !s.ok()) return Annotate(s, "resending the step");
  }
  if (replay && batch) {
    if (absl::Status s = send(kBatchBarrier, nullptr); !s.ok()) return Annotate(s, "resending the step");
  }
  absl::MutexLock l(&mu_);
  ++j->resyncs;
  return absl::OkStatus();
}

}  // namespace oar::rpc
