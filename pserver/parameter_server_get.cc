// ParameterServer's Gets: served at once when the step's parameters are
// ready; otherwise, in sync mode, waited for at the StepBarrier — on a pool
// thread (Handle: gRPC, in-process), or parked by a transport that can
// answer later (TryHandleDeferred: the stream transports) and answered by
// the loop thread right after the optimize pass, so that no thread must be
// woken per Get. Both paths check the same things in the same order and
// keep the ReplayGuard's record: a retried Get whose first copy passed the
// barrier is served again without it. A sync pserver's parameters live in
// shared memory lent to the trainers on its host (LendParams), and its
// barrier Gets are answered stable: over shm, the reply says where the
// value lies and the trainer reads it there, until its next gradient for
// it. When a trainer completes (and so stops sending gradients while others
// may train on), the parameters move back into private memory before the
// next optimize block runs (param_lending.h).
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/rpc/stream/shared_region.h"
#include "glog/logging.h"
#include "pserver/parameter_server.h"

namespace oar {

absl::StatusOr<const Variable*> ParameterServer::ServedVar(const std::string& name, int id) const {
  if (absl::Status s = store_->CheckServable(name); !s.ok()) return Annotate(s, Who(id));
  const Variable* v = scope_->FindVar(name);
  if (v == nullptr || !v->IsInitialized()) {
    return absl::NotFoundError(absl::StrCat(Who(id), ": parameter '", name, "' has no value"));
  }
  return v;
}

absl::Status ParameterServer::HandleGet(rpc::RpcKind kind, const rpc::IncomingMessage& request, int id, bool barrier,
                                        rpc::Reply* reply) {
  const std::string& name = request.header().name();
  OAR_ASSIGN_OR_RETURN(const Variable* v, ServedVar(name, id));
  if (barrier) OAR_RETURN_IF_ERROR(barrier_->BeforeGet(id));
  reply->name = name;
  reply->stable = StableGets(kind);
  // The block that updates this parameter may be running: read under its lock.
  auto owner = param_block_.find(name);
  if (owner == param_block_.end()) {
    reply->var = *v;
    return absl::OkStatus();
  }
  absl::ReaderMutexLock l(block_mu_.at(owner->second).get());
  reply->var = *v;  // shares the buffer; the next update writes a new one
  return absl::OkStatus();
}

bool ParameterServer::TryHandleDeferred(rpc::RpcKind kind, std::shared_ptr<const rpc::IncomingMessage> request,
                                        const rpc::Respond& respond) {
  const rpc::MessageHeader& h = request->header();
  const int64_t tid = h.trainer_id();
  // A bad trainer id, and a restored pserver's resync checks: the usual path.
  // A trainer of another job shape (CheckJobAgrees): refused there too.
  // A job stopped by a trainer's ABORT: refused there with the reason.
  // A trainer's first call (its settings to compare): the usual path too.
  if (!Defers(kind) || tid < 0 || tid >= config_.fanin || config_.restored || !CheckJobAgrees(h).ok() ||
      abort_.aborting() || !h.meta.oar_job_settings().empty()) {
    return false;
  }
  const int id = static_cast<int>(tid);
  const uint64_t seq = static_cast<uint64_t>(h.meta.oar_seq());
  std::optional<ReplayGuard::Ticket> ticket = guard_->TryBegin(id, seq);
  if (!ticket) return false;  // a retry whose first copy is still parked: it waits on a pool thread
  const absl::Time start = absl::Now();
  const std::thread::id reader = std::this_thread::get_id();
  activity_.Heard(id);
  auto answer = [this, kind, request, start, respond, id](absl::Time began, absl::Status s, rpc::Reply reply) {
    RecordRequest(kind, *request, start, began);
    abort_.NoteTold(id, s);  // a parked Get that a trainer's ABORT ended
    respond(std::move(s), std::move(reply));
  };
  if (ticket->duplicate) {
    rpc::Reply reply;
    absl::Status s = ticket->first_answer;
    if (s.ok()) s = HandleGet(kind, *request, id, /*barrier=*/false, &reply);
    answer(start, std::move(s), std::move(reply));
    return true;
  }
  if (absl::StatusOr<const Variable*> v = ServedVar(h.name(), id); !v.ok()) {  // refused before it waits
    guard_->End(id, seq, v.status());
    NoteRefusal(tid, v.status());
    answer(start, v.status(), rpc::Reply{});
    return true;
  }
  barrier_->WhenGetReady(id, [this, kind, request, id, seq, start, reader, answer = std::move(answer)](absl::Status s) {
    const absl::Time began = std::this_thread::get_id() == reader ? start : absl::Now();
    rpc::Reply reply;
    s = s.ok() ? HandleGet(kind, *request, id, /*barrier=*/false, &reply) : Annotate(s, Who(id));
    guard_->End(id, seq, s);
    answer(began, std::move(s), std::move(reply));
  });
  return true;
}

std::shared_ptr<const rpc::stream::SharedRegion> ParameterServer::LendParams() {
  std::set<std::string> names;
  for (const auto& [id, block] : blocks_) {
    const BlockDesc& b = program_.Block(static_cast<size_t>(id));
    for (size_t i = 0; i < b.OpSize(); ++i) {
      for (const auto& p : b.Op(i).Output("ParamOut")) names.insert(p);
    }
  }
  return lending_->Lend(names);
}

}  // namespace oar
