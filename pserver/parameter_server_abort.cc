// ParameterServer and a trainer that failed: its ABORT@RECV checked and
// handed to the AbortProtocol (abort_protocol.h), which stops the job.
//
// Refused: an ABORT from a process of that trainer id that a later one
// replaced (its sequence numbers' incarnation is not the latest the pserver
// has seen), one from a trainer an elastic sync job took out already, and
// one whose oar_abort_origin names no trainer of the job.
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "glog/logging.h"
#include "pserver/parameter_server.h"

namespace oar {

absl::Status ParameterServer::HandleAbort(const rpc::MessageHeader& h, int id) {
  if (!guard_->FromTheLatestRun(id, static_cast<uint64_t>(h.meta.oar_seq()))) {
    return absl::FailedPreconditionError(absl::StrCat(Name(), ": an ABORT from an earlier process of trainer ", id,
                                                      ", since replaced; the job goes on"));
  }
  // An elastic sync job took the trainer out already (its lease ran out
  // while it was cut off or stopped): its failure, on finding itself out,
  // is its own, and the job goes on.
  if (ElasticSync() && barrier_->HasLeft(id)) {
    LOG(WARNING) << Who(id) << ", which had left the job, failed: " << h.meta.out_varname() << "; the job goes on";
    return absl::FailedPreconditionError(absl::StrCat(Name(), ": trainer ", id,
                                                      " had left the job (its lease ran out) when it failed; the "
                                                      "job goes on without it"));
  }
  // 0: the sender failed; N + 1: it passes on trainer N's failure, which
  // another pserver told it of.
  const int64_t origin = h.meta.oar_abort_origin();
  if (origin < 0 || origin > config_.fanin) {
    return absl::InvalidArgumentError(absl::StrCat(Who(id), ": ABORT@RECV's oar_abort_origin ", origin,
                                                   " names no trainer of this job (0, or 1 + a trainer id below ",
                                                   config_.fanin, ")"));
  }
  const bool completed = activity_.completed(id);
  absl::Status why;
  absl::Status s =
      abort_.Abort(id, origin > 0 ? static_cast<int>(origin - 1) : id, h.meta.out_varname(), completed, &why);
  if (!s.ok()) return Annotate(s, Name());
  activity_.Wake();  // an async Run looks at abort_.aborting() now
  LOG(ERROR) << Name() << ": " << why.message();
  if (barrier_) barrier_->End(why);  // every wait and parked Get hears why
  return absl::OkStatus();
}

}  // namespace oar
