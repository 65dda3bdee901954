#include "common/rpc/rpc_client.h"
#include "common/rpc/status_payloads.h"

#include <algorithm>
#include <atomic>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/rpc/client_call.h"
#include "common/rpc/remote_prefetch.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/rpc_metrics.h"
#include "glog/logging.h"

namespace oar::rpc {

uint64_t NewIncarnation() {
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return ((r % ((uint64_t{1} << (64 - kSeqCounterBits - 1)) - 1)) + 1) << kSeqCounterBits;  // nonzero, positive
}

namespace {

class FailedCall : public RpcCall {
 public:
  explicit FailedCall(absl::Status s) : s_(std::move(s)) {}
  absl::Status Wait() override { return s_; }

 private:
  absl::Status s_;
};

}  // namespace

RpcClient::RpcClient(Transport* transport, Options options)
    : transport_(transport),
      options_(options),
      incarnation_(options.incarnation != 0 ? options.incarnation : NewIncarnation()) {
  if (options_.deadline_ms <= 0) options_.deadline_ms = transport->options().deadline_ms;
  if (options_.retry_times < 0) options_.retry_times = transport->options().retry_times;
}

absl::Status WaitAll(const std::vector<std::shared_ptr<RpcCall>>& calls) {
  CallErrors errors;
  for (const auto& c : calls) errors.Update(c->Wait());
  return errors.status();
}

RpcClient::~RpcClient() = default;

std::shared_ptr<RpcCall> RpcClient::Start(RpcKind kind, const std::string& ep, const std::string& name,
                                          const Variable* var, const SendOptions& options, Variable* out,
                                          int64_t* reply_step) {
  if (absl::Status s = CheckEndpoint(ep); !s.ok()) return std::make_shared<FailedCall>(s);
  sendrecv::VariableMessage meta;
  meta.set_varname(name);
  meta.set_trainer_id(options.trainer_id);
  const bool abort = kind == RpcKind::kSend && name == kAbort;
  meta.set_oar_trainers(abort ? 0 : options_.trainers);
  meta.set_oar_sync_mode(abort ? 0 : options_.sync_mode);
  meta.set_out_varname(options.out_varname);
  meta.set_table_name(options.table_name);
  meta.set_oar_replay(options.replay);
  meta.set_oar_step(options.step);
  meta.set_oar_abort_origin(options.abort_origin);
  {
    absl::MutexLock l(&mu_);
    // A trainer's first call to `ep` says the job's settings (a retry of it too).
    if (contacted_[options.trainer_id].insert(ep).second && !abort) meta.set_oar_job_settings(options_.job_settings);
    meta.set_oar_seq(static_cast<int64_t>(incarnation_ | ++next_seq_[{options.trainer_id, ep}]));
    if (kind == RpcKind::kSend && !options.replay) {  // BATCH_BARRIER says how many variables it covers
      int64_t& sent = sent_since_barrier_[{options.trainer_id, ep}];
      if (name == kBatchBarrier) {
        meta.set_oar_sent(sent);
        sent = 0;
      } else if (name != kFetchBarrier && name != kComplete && name != kResync && name != kAbort && name != kJoinHold &&
                 name != kJoin) {
        ++sent;
      }
    }
  }
  ClientCall::Recovery recovery;
  if (!options.replay && !abort) {  // replays (and a failed trainer's ABORT) are not journaled and do not recover
    recovery.client = this;
    recovery.trainer = options.trainer_id;
    recovery.resyncs_seen = journal_.Resyncs(options.trainer_id, ep);
    if (kind == RpcKind::kSend && name == kBatchBarrier) {
      journal_.AddBatchBarrier(options.trainer_id, ep);
    } else if (kind == RpcKind::kSend && name == kFetchBarrier) {
      recovery.ends_step = true;
    } else if (kind == RpcKind::kSend && var != nullptr && var->IsInitialized()) {
      journal_.AddSend(options.trainer_id, ep, name, *var);
    }
  }
  auto header = HeaderOf(std::move(meta), var, options.raw_bytes);
  if (!header.ok()) {
    return std::make_shared<FailedCall>(Annotate(header.status(), absl::StrCat(KindName(kind), " to ", ep)));
  }
  auto request = std::make_shared<OutgoingMessage>();
  request->header = *std::move(header);
  if (var != nullptr) request->var = *var;  // shares the buffers
  request->lend_payload = kind == RpcKind::kSend && options.lend_payload;
  if ((kind == RpcKind::kGet || kind == RpcKind::kGetNoBarrier) && out != nullptr) {
    request->reply_may_view = options.reply_may_view;
    // A stream transport may read the value straight into it.
    if (out->IsType<Tensor>()) request->reply_into = out->GetMutable<Tensor>();
  }
  const int deadline_ms = options.deadline_ms > 0 ? options.deadline_ms : options_.deadline_ms;
  const int retry_times = options.retry_times >= 0 ? options.retry_times : options_.retry_times;
  auto call = std::make_shared<ClientCall>(transport_, kind, ep, std::move(request), out,
                                           absl::Now() + absl::Milliseconds(deadline_ms), retry_times);
  call->set_recovery(recovery);
  call->set_owner(this);
  call->set_reply_step(reply_step);
  if (options.ahead_of_sends) call->set_ahead_of_sends();
  call->StartAttempt();
  return call;
}

absl::Status RpcClient::Recover(int64_t trainer, const std::string& ep, int64_t resyncs_seen) {
  auto resync = [&](int64_t fetches) -> absl::StatusOr<int64_t> {
    int64_t restored = -1;
    OAR_RETURN_IF_ERROR(Start(RpcKind::kSend, ep, kResync, nullptr,
                              {.trainer_id = trainer, .replay = true, .step = fetches}, nullptr, &restored)
                            ->Wait());
    return restored;
  };
  auto send = [&](const std::string& name, const Variable* var) {
    return Start(RpcKind::kSend, ep, name, var, {.trainer_id = trainer, .replay = true}, nullptr)->Wait();
  };
  return journal_.Resync(trainer, ep, resyncs_seen, resync, send);
}

void RpcClient::SayUnreachable(const std::string& ep, const absl::Status& why, int deadline_ms) {
  absl::MutexLock l(&mu_);
  if (!unreachable_since_.emplace(ep, absl::Now()).second) return;
  LOG(WARNING) << ep << " cannot be reached (" << why.message() << "); it may be restarting, so its calls wait for it "
               << "up to their deadline (--rpc_deadline " << deadline_ms / 1000.0 << " s)";
}

void RpcClient::SayReachable(const std::string& ep) {
  absl::MutexLock l(&mu_);
  auto it = unreachable_since_.find(ep);
  if (it == unreachable_since_.end()) return;
  LOG(WARNING) << ep << " answers again after " << absl::FormatDuration(absl::Now() - it->second);
  unreachable_since_.erase(it);
}

std::shared_ptr<RpcCall> RpcClient::AsyncSendVar(const std::string& ep, const std::string& name, const Variable* var,
                                                 const SendOptions& options) {
  return Start(RpcKind::kSend, ep, name, var, options, nullptr);
}

std::shared_ptr<RpcCall> RpcClient::AsyncGetVar(const std::string& ep, const std::string& name, Variable* out,
                                                int64_t trainer_id, bool no_barrier) {
  return Start(no_barrier ? RpcKind::kGetNoBarrier : RpcKind::kGet, ep, name, nullptr, {.trainer_id = trainer_id}, out);
}

std::shared_ptr<RpcCall> RpcClient::AsyncGetView(const std::string& ep, const std::string& name, Variable* out,
                                                 int64_t trainer_id) {
  return Start(RpcKind::kGet, ep, name, nullptr, {.trainer_id = trainer_id, .reply_may_view = true}, out);
}

std::shared_ptr<RpcCall> RpcClient::AsyncPrefetchVar(const std::string& ep, const std::string& name,
                                                     const std::string& out_name, const Variable* ids,
                                                     const std::string& table, Variable* out, int64_t trainer_id) {
  return Start(RpcKind::kPrefetch, ep, name, ids,
               {.trainer_id = trainer_id, .out_varname = out_name, .table_name = table}, out);
}

std::shared_ptr<RpcCall> RpcClient::AsyncSendBatchBarrier(const std::string& ep, int64_t trainer_id) {
  return AsyncSendVar(ep, kBatchBarrier, nullptr, {.trainer_id = trainer_id});
}
absl::Status RpcClient::SendBatchBarriers(int64_t trainer_id, const std::vector<std::string>& endpoints) {
  std::vector<std::shared_ptr<RpcCall>> calls(endpoints.size());
  for (size_t i = 0; i < endpoints.size(); ++i) {
    if (!options_.barrier_after_sends && transport_->KeepsOrder(endpoints[i])) {
      calls[i] = AsyncSendVar(endpoints[i], kBatchBarrier, nullptr, {.trainer_id = trainer_id, .ahead_of_sends = true});
    }
  }
  // A send that failed is the error to report (the trainer stops); the
  // barriers already written are left unwaited (a refusal among their
  // answers goes unread: the pservers answer the sends with it too).
  OAR_RETURN_IF_ERROR(WaitPending(trainer_id));
  for (size_t i = 0; i < endpoints.size(); ++i) {
    if (calls[i] == nullptr) calls[i] = AsyncSendBatchBarrier(endpoints[i], trainer_id);
  }
  return WaitAll(calls);
}

std::shared_ptr<RpcCall> RpcClient::AsyncSendFetchBarrier(const std::string& ep, int64_t trainer_id) {
  return AsyncSendVar(ep, kFetchBarrier, nullptr, {.trainer_id = trainer_id});
}
std::shared_ptr<RpcCall> RpcClient::AsyncSendComplete(const std::string& ep, int64_t trainer_id) {
  return AsyncSendVar(ep, kComplete, nullptr, {.trainer_id = trainer_id});
}

std::shared_ptr<RpcCall> RpcClient::AsyncSendJoinHold(const std::string& ep, int64_t trainer_id, int64_t* held) {
  return Start(RpcKind::kSend, ep, kJoinHold, nullptr, {.trainer_id = trainer_id}, nullptr, held);
}

std::shared_ptr<RpcCall> RpcClient::AsyncSendJoin(const std::string& ep, int64_t trainer_id, int64_t entry,
                                                  const std::string& member) {
  return AsyncSendVar(ep, kJoin, nullptr, {.trainer_id = trainer_id, .out_varname = member, .step = entry});
}

std::shared_ptr<RpcCall> RpcClient::AsyncSendAbort(const std::string& ep, int64_t trainer_id, const absl::Status& why) {
  const std::optional<int> heard = JobStoppedBy(why);
  return AsyncSendVar(ep, kAbort, nullptr,
                      {.trainer_id = trainer_id,
                       .out_varname = std::string(why.message()),
                       .abort_origin = heard.has_value() ? *heard + 1 : 0,
                       .deadline_ms = 2000,
                       .retry_times = 0});
}

std::shared_ptr<RpcCall> RpcClient::AsyncCheckpointNotify(const std::string& ep, const std::string& dir,
                                                          int64_t trainer_id) {
  return Start(RpcKind::kCheckpointNotify, ep, kCheckpointSave, nullptr, {.trainer_id = trainer_id, .out_varname = dir},
               nullptr);
}

absl::Status RpcClient::WaitServerReady(const std::vector<std::string>& endpoints, int timeout_ms,
                                        const std::function<bool()>& stop) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  const absl::Duration slice = stop ? absl::Milliseconds(500) : absl::InfiniteDuration();
  std::vector<std::string> missing;
  for (const auto& ep : endpoints) {
    OAR_RETURN_IF_ERROR(CheckEndpoint(ep));
    // One that waited out the deadline leaves the next only a moment: enough
    // to see a server that is up, so the error names only the missing ones.
    const absl::Time until = std::max(deadline, absl::Now() + absl::Milliseconds(500));
    while (true) {
      const absl::Time slice_end = std::min(until, absl::Now() + slice);
      const absl::Status ready = transport_->WaitReady(ep, slice_end);
      if (ready.ok()) break;
      // Only a server not up yet is tried again (refused, or no answer in
      // time); one that answered wrongly (TLS, authentication) is missing.
      const bool transient = absl::IsDeadlineExceeded(ready) || absl::IsUnavailable(ready);
      if (!stop || !transient || absl::Now() >= until) {
        missing.push_back(ep);
        break;
      }
      absl::SleepFor(slice_end - absl::Now());  // it may have failed at once (refused)
      if (stop()) return absl::CancelledError(absl::StrCat("stopped waiting for ", ep));
    }
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("not reachable after ", timeout_ms, " ms: ", absl::StrJoin(missing, ", ")));
}

void RpcClient::AddPending(int64_t trainer_id, std::shared_ptr<RpcCall> call) {
  absl::MutexLock l(&mu_);
  pending_[trainer_id].push_back(std::move(call));
}

absl::Status RpcClient::WaitPending(int64_t trainer_id) {
  std::vector<std::shared_ptr<RpcCall>> calls;
  {
    absl::MutexLock l(&mu_);
    auto it = pending_.find(trainer_id);
    if (it == pending_.end()) return absl::OkStatus();
    calls.swap(it->second);
  }
  return WaitAll(calls);
}

absl::Status RpcClient::SendCompleteToAll(int64_t trainer_id) {
  std::vector<int64_t> waiting;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [id, calls] : pending_) {
      if (trainer_id < 0 || id == trainer_id) waiting.push_back(id);
    }
  }
  for (int64_t id : waiting) (void)WaitPending(id);  // their errors were the ops' to report
  std::map<int64_t, std::set<std::string>> todo;
  {
    absl::MutexLock l(&mu_);
    for (auto it = contacted_.begin(); it != contacted_.end();) {
      if (trainer_id < 0 || it->first == trainer_id) {
        todo.insert(contacted_.extract(it++));
      } else {
        ++it;
      }
    }
  }
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (const auto& [id, eps] : todo) {
    for (const auto& ep : eps) calls.push_back(AsyncSendComplete(ep, id));
  }
  absl::Status first;
  for (auto& c : calls) {
    absl::Status s = c->Wait();
    // A pserver that is already gone has nothing left to wait for: this
    // trainer's work is done either way, so say so and go on.
    if (s.code() == absl::StatusCode::kUnavailable) {
      LOG(WARNING) << s.message();
      continue;
    }
    first.Update(s);
  }
  {
    absl::MutexLock l(&mu_);  // the COMPLETE calls themselves are no reason to send another
    for (const auto& [id, eps] : todo) contacted_.erase(id);
  }
  return first;
}

RunEnv ClientEnv(RpcClient* client) {
  RunEnv env;
  env.rpc = client;
  env.transport = client->transport();
  env.on_close = [client] { return client->SendCompleteToAll(); };
  env.prefetch_rows = [client](const RemoteTable& table, const std::vector<int64_t>& ids, Tensor* rows) {
    return PrefetchRows(client, table, ids, rows);
  };
  return env;
}

}  // namespace oar::rpc
