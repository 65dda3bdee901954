// ParameterServer's requests: what each one is (a gradient, a barrier,
// COMPLETE, a Get, a checkpoint), the checks every one passes first (the
// trainer id, a restarted pserver's resync, the replay guard) and the
// metrics each is timed into. Gets are answered in parameter_server_get.cc.
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_metrics.h"
#include "glog/logging.h"
#include "pserver/parameter_server.h"
#include "pserver/pserver_metrics.h"

namespace oar {

absl::Status ParameterServer::Handle(rpc::RpcKind kind, const rpc::IncomingMessage& request, rpc::Reply* reply) {
  const absl::Time start = absl::Now();
  absl::Status s = HandleRequest(kind, request, reply);
  RecordRequest(kind, request, start, start);
  NoteRefusal(request.header().trainer_id(), s);
  abort_.NoteTold(request.header().trainer_id(), s);
  return s;
}

void ParameterServer::NoteRefusal(int64_t trainer_id, const absl::Status& s) {
  if (!(absl::IsInvalidArgument(s) || absl::IsNotFound(s) || absl::IsFailedPrecondition(s) ||
        absl::IsAlreadyExists(s))) {
    return;
  }
  absl::MutexLock l(&state_mu_);
  if (refused_.size() < kMaxRefusalsKept || refused_.count(trainer_id)) refused_[trainer_id] = std::string(s.message());
}

void ParameterServer::RecordRequest(rpc::RpcKind kind, const rpc::IncomingMessage& request, absl::Time arrived,
                                    absl::Time began) {
  const char* method = rpc::MethodLabel(kind, request.header().name());
  const absl::Time end = absl::Now();
  if (config_.profiler != nullptr) config_.profiler->Record(absl::StrCat("rpc:", method), "rpc", began, end);
  RecordPserverRequest(method, absl::ToDoubleSeconds(end - arrived));
}

absl::Status ParameterServer::CheckJobAgrees(const rpc::MessageHeader& h) const {
  const int64_t tid = h.trainer_id();
  if (const int64_t trainers = h.meta.oar_trainers(); trainers != 0 && trainers != config_.fanin) {
    return absl::FailedPreconditionError(
        absl::StrCat(Name(), " serves ", config_.fanin, " trainer(s) (its Fanin) but trainer ", tid, " counts ",
                     trainers, " in the job; start every trainer and pserver with the same PADDLE_TRAINERS_NUM"));
  }
  if (const int64_t mode = h.meta.oar_sync_mode(); mode != 0 && (mode == 1) != config_.sync_mode) {
    return absl::FailedPreconditionError(absl::StrCat(
        Name(), " trains ", config_.sync_mode ? "sync" : "async", " but trainer ", tid, " trains ",
        mode == 1 ? "sync" : "async", "; start every trainer and pserver with the same --async (or --sync)"));
  }
  return absl::OkStatus();
}

absl::Status ParameterServer::CheckSettingsAgree(const rpc::MessageHeader& h, int id) {
  if (h.meta.oar_job_settings().empty()) return absl::OkStatus();
  auto mine = DecodeJobSettings(h.meta.oar_job_settings());
  if (!mine.ok()) return Annotate(mine.status(), Who(id));
  absl::MutexLock l(&state_mu_);
  if (settings_from_ < 0) {
    job_settings_ = *std::move(mine);
    settings_from_ = id;
    return absl::OkStatus();
  }
  const std::string differ = Disagreement(*mine, id, job_settings_, settings_from_);
  if (differ.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(Name(), ": ", differ));
}

absl::Status ParameterServer::HandleRequest(rpc::RpcKind kind, const rpc::IncomingMessage& request, rpc::Reply* reply) {
  const rpc::MessageHeader& h = request.header();
  const int64_t tid = h.trainer_id();
  // First: a count that differs explains a trainer_id out of range too.
  OAR_RETURN_IF_ERROR(CheckJobAgrees(h));
  if (tid < 0 || tid >= config_.fanin) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": trainer_id ", tid, " is not in [0, ", config_.fanin, ") (Fanin)"));
  }
  const int id = static_cast<int>(tid);
  activity_.Heard(id);
  // Before the replay guard and a restored pserver's resync: the trainer's
  // last word, from whichever process of it failed.
  if (kind == rpc::RpcKind::kSend && h.name() == rpc::kAbort) return HandleAbort(h, id);
  OAR_RETURN_IF_ERROR(abort_.Refusal());
  OAR_RETURN_IF_ERROR(CheckSettingsAgree(h, id));
  if (kind == rpc::RpcKind::kPrefetch) return HandlePrefetch(request, id, reply);  // read-only: no replay guard
  // Idempotent, and a HOLD's answer is its step: no replay guard.
  if (kind == rpc::RpcKind::kSend && (h.name() == rpc::kJoinHold || h.name() == rpc::kJoin)) {
    return HandleJoin(h, id, reply);
  }
  bool covered = false;
  if (absl::Status s = CheckSynced(kind, h, id, reply, &covered); !s.ok() || covered) return s;
  const uint64_t seq = static_cast<uint64_t>(h.meta.oar_seq());
  OAR_ASSIGN_OR_RETURN(ReplayGuard::Ticket ticket,
                       guard_->Begin(id, seq, absl::Now() + absl::Milliseconds(config_.timeout_ms)));
  const bool get = kind == rpc::RpcKind::kGet || kind == rpc::RpcKind::kGetNoBarrier;
  if (ticket.duplicate) {
    // A retry whose first copy arrived: the same answer. A Get is read-only:
    // serve it again, without the barrier the first copy already passed.
    if (get && ticket.first_answer.ok()) return HandleGet(kind, request, id, /*barrier=*/false, reply);
    return ticket.first_answer;
  }
  absl::Status s;
  if (get) {
    s = HandleGet(kind, request, id, kind == rpc::RpcKind::kGet && config_.sync_mode, reply);
  } else if (kind == rpc::RpcKind::kCheckpointNotify) {
    s = HandleCheckpoint(request);
  } else {
    s = HandleSend(request, id);
  }
  guard_->End(id, seq, s);
  return s;
}

absl::Status ParameterServer::CheckSynced(rpc::RpcKind kind, const rpc::MessageHeader& h, int id, rpc::Reply* reply,
                                          bool* covered) {
  OAR_ASSIGN_OR_RETURN(const ResyncGate::Passage p, resync_.Check(kind, h, id, Name()));
  *covered = p.verdict == ResyncGate::Verdict::kCovered;
  if (!p.resynced) return absl::OkStatus();
  if (p.fetched) barrier_->AdmitFetched(id);
  reply->step = resync_.restored_step();
  if (h.meta.oar_step() == 0) {  // a trainer that has not pulled yet: a new job resuming
    LOG(INFO) << Name() << ": trainer " << id << " starts from this pserver's checkpoint of step "
              << resync_.restored_step();
  } else {
    LOG(INFO) << Name() << ": trainer " << id << " rejoined at step " << h.meta.oar_step() - 1;
  }
  return absl::OkStatus();
}

absl::Status ParameterServer::HandleJoin(const rpc::MessageHeader& h, int id, rpc::Reply* reply) {
  if (!ElasticSync()) {
    return absl::FailedPreconditionError(absl::StrCat(Name(), ": trainer ", id, " sent ", h.name(),
                                                      ", but this pserver's job is not an elastic sync job"));
  }
  if (h.name() == rpc::kJoinHold) {
    OAR_ASSIGN_OR_RETURN(const int step, barrier_->Hold(id));
    reply->step = step;
    return absl::OkStatus();
  }
  const int64_t entry = h.meta.oar_step();
  if (entry < 0 || entry > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(Name(), ": trainer ", id, " asked to join at step ", entry));
  }
  OAR_RETURN_IF_ERROR(Annotate(barrier_->Join(id, static_cast<int>(entry), h.meta.out_varname()), Name()));
  LOG(INFO) << Name() << ": trainer " << id << " joined the job at step " << entry;
  GetPserverMetrics().trainer_joins->Add();
  return absl::OkStatus();
}

absl::Status ParameterServer::HandleSend(const rpc::IncomingMessage& request, int id) {
  if (request.header().payload_bytes > 0) {
    GetPserverMetrics()
        .received_bytes->With({std::to_string(id)})
        ->Add(static_cast<double>(request.header().payload_bytes));
  }
  const std::string& name = request.header().name();
  if (name == rpc::kResync) return absl::OkStatus();  // to a pserver that did not restart
  if (name == rpc::kBatchBarrier) {
    if (!barrier_) return absl::OkStatus();
    absl::Status s = barrier_->BatchBarrier(id, request.header().meta.oar_sent(),
                                            rpc::IncarnationOf(request.header().meta.oar_seq()));
    if (absl::IsUnavailable(s)) VLOG(1) << Name() << ": " << s.message() << "; it is sent again after them";
    return s;
  }
  const uint64_t incarnation = rpc::IncarnationOf(request.header().meta.oar_seq());
  if (name == rpc::kFetchBarrier) return barrier_ ? barrier_->FetchBarrier(id, incarnation) : absl::OkStatus();
  if (name == rpc::kComplete) {
    // Before it stops counting: what it last read stays as it was (ParamLending).
    if (barrier_) lending_->MarkDue();
    if (barrier_) OAR_RETURN_IF_ERROR(barrier_->Complete(id, incarnation));
    if (activity_.Complete(id)) LOG(INFO) << Name() << ": trainer " << id << " completed";
    if (barrier_) ScheduleReady();  // the blocks that waited only for this trainer
    return absl::OkStatus();
  }
  auto admitted = store_->Admit(request.header(), id);
  if (!admitted.ok()) return Annotate(admitted.status(), Name());
  const VarStore::Receivable& r = **admitted;
  absl::Status s;
  if (config_.sync_mode) {
    OAR_RETURN_IF_ERROR(barrier_->BeginReceive(id, rpc::IncarnationOf(request.header().meta.oar_seq())));
    s = store_->Receive(r, id, request);
    if (s.ok() && ElasticSync()) store_->SumAhead(r, barrier_->live());  // off the barrier's path
    if (s.ok()) MaybeRunEarly(r);                                        // while the phase cannot move on
    barrier_->EndReceive(id, s.ok(), rpc::IncarnationOf(request.header().meta.oar_seq()));
  } else {
    Scope* child = &scope_->NewScope();
    store_->ReceiveInto(r, request, child);
    s = RunLrBlockAsync(store_->NameOf(r) == first_grad_);
    if (s.ok()) {
      absl::ReaderMutexLock lr(&lr_mu_);
      s = RunBlockLocked(store_->BlockOf(r), child);
    }
    scope_->DeleteScope(child);
  }
  if (s.ok()) {
    absl::MutexLock l(&state_mu_);
    ++stats_.gradients_applied;
  }
  return s.ok() ? s : Annotate(s, Who(id));
}

}  // namespace oar
