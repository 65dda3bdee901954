#include "common/rpc/rpc_client.h"

#include <algorithm>
#include <atomic>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc/rpc_metrics.h"
#include "common/status.h"
#include "glog/logging.h"

namespace oar::rpc {
namespace {

uint64_t NewIncarnation() {
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return ((r % ((uint64_t{1} << (64 - kSeqCounterBits - 1)) - 1)) + 1) << kSeqCounterBits;  // nonzero, positive
}

}  // namespace

// One RPC with its retries. An attempt runs on the transport's threads; the
// retry decision happens in Wait, on the caller's thread.
class ClientCall : public RpcCall, public std::enable_shared_from_this<ClientCall> {
 public:
  ClientCall(Transport* transport, RpcKind kind, std::string ep, std::shared_ptr<const OutgoingMessage> request,
             Variable* out, absl::Time deadline, int retry_times)
      : transport_(transport), kind_(kind), ep_(std::move(ep)), name_(request->header.name()),
        // A prefetch is answered with the rows, named as the request's out_varname (Fluid's).
        reply_name_(kind == RpcKind::kPrefetch ? request->header.meta.out_varname() : name_),
        request_(std::move(request)), out_(out), deadline_(deadline), retry_times_(retry_times),
        method_(MethodLabel(kind, name_)), started_(absl::Now()) {}

  // How the call recovers from a restarted pserver (see StepJournal).
  struct Recovery {
    RpcClient* client = nullptr;  // null: no recovery (RESYNC and replayed messages)
    int64_t trainer = 0;
    int64_t resyncs_seen = 0;
    bool ends_step = false;  // FETCH_BARRIER: OK ends the trainer's step with ep
  };
  void set_recovery(Recovery r) { recovery_ = r; }
  // Where the reply's oar_step goes (RESYNC@RECV).
  void set_reply_step(int64_t* step) { reply_step_ = step; }
  // A BATCH_BARRIER written ahead of its sends' answers: refused for having
  // overtaken one (UNAVAILABLE), it is sent again at once, once, whatever
  // retry_times says — its Wait runs once the sends were answered
  // (SendBatchBarriers), so that attempt comes after them. (An UNAVAILABLE
  // of the connection gets the same one attempt: the same sequence number,
  // so a barrier that was counted is not counted again.)
  void set_ahead_of_sends() { ahead_of_sends_ = true; }

  void StartAttempt() {
    {
      absl::MutexLock l(&mu_);
      done_ = false;
      answered_.store(false, std::memory_order_relaxed);
      reply_.reset();
    }
    auto self = shared_from_this();  // alive until the attempt ended
    std::unique_ptr<ReplyReader> reader =
        transport_->CallForWaiter(kind_, ep_, request_, deadline_,
                                  [self](absl::Status s, std::unique_ptr<IncomingMessage> reply) {
                                    absl::MutexLock l(&self->mu_);
                                    self->status_ = std::move(s);
                                    self->reply_ = std::move(reply);
                                    self->done_ = true;
                                    self->answered_.store(true, std::memory_order_release);
                                  });
    absl::MutexLock l(&mu_);
    reader_ = std::move(reader);
  }

  absl::Status Wait() override {
    if (finished_) return final_;
    absl::Duration backoff = absl::Milliseconds(50);
    for (int attempt = 0;; ++attempt) {
      absl::Status s;
      std::unique_ptr<IncomingMessage> reply;
      std::unique_ptr<ReplyReader> reader;
      {
        absl::MutexLock l(&mu_);
        reader = std::move(reader_);
      }
      if (reader != nullptr) {
        // This thread reads the reply off the connection itself: woken by
        // the reply's arrival, not by the thread that read it.
        reader->Await(deadline_);
        reader.reset();
      } else if (const int spin_us = SpinMicros(FLAGS_rpc_wait_spin_us); spin_us > 0) {
        // A reply that comes within a few microseconds is taken without
        // sleeping (--rpc_wait_spin_us): a sleeping thread's wake-up can
        // cost more than the whole round trip.
        const absl::Time until = absl::Now() + absl::Microseconds(spin_us);
        for (int spin = 0; !answered_.load(std::memory_order_acquire); ++spin) {
          SpinPause();
          if ((spin & 63) == 63 && absl::Now() >= until) break;
        }
      }
      {
        absl::MutexLock l(&mu_);
        // The transport ends every attempt by the deadline; the slack only
        // guards against one that does not.
        if (!mu_.AwaitWithDeadline(absl::Condition(&done_), deadline_ + absl::Seconds(5))) {
          s = absl::DeadlineExceededError("the transport never answered");
        } else {
          s = status_;
          reply = std::move(reply_);
        }
      }
      if (s.ok()) s = Finish(reply.get());
      if (s.code() == absl::StatusCode::kAborted && recovery_.client != nullptr) {
        // The pserver restarted from its checkpoint: resend the step, then
        // this call unless the resent step carried it.
        absl::Status r = recovery_.client->Recover(recovery_.trainer, ep_, recovery_.resyncs_seen);
        if (r.ok() && absl::Now() < deadline_) {
          recovery_.resyncs_seen = recovery_.client->journal_.Resyncs(recovery_.trainer, ep_);
          StartAttempt();
          continue;
        }
        if (!r.ok()) s = r;
      }
      const absl::Duration left = deadline_ - absl::Now();
      if (ahead_of_sends_ && absl::IsUnavailable(s) && left > absl::ZeroDuration()) {
        ahead_of_sends_ = false;  // once
        ++retry_times_;           // not one of the retries the flag allows
        StartAttempt();
        continue;
      }
      if (s.ok() || !Retryable(s) || attempt >= retry_times_ || left <= absl::ZeroDuration() ||
          s.code() == absl::StatusCode::kDeadlineExceeded) {
        return Done(s, attempt);
      }
      absl::SleepFor(std::min(backoff, left));
      backoff = std::min(backoff * 2, absl::Seconds(2));
      StartAttempt();
    }
  }

 private:
  absl::Status Finish(const IncomingMessage* reply) {
    if (reply_step_ != nullptr && reply != nullptr) *reply_step_ = reply->header().meta.oar_step();
    if (out_ == nullptr) return absl::OkStatus();
    if (reply == nullptr || reply->header().kind == PayloadKind::kNone) {
      return absl::NotFoundError(absl::StrCat("the reply holds no value"));
    }
    if (!reply->header().name().empty() && reply->header().name() != reply_name_) {
      return absl::InvalidArgumentError(absl::StrCat("the reply carries '", reply->header().name(), "'"));
    }
    reply->DecodeInto(out_);  // checked when parsed: cannot fail half-way
    Metrics().client_received_bytes->With({method_, ep_})->Add(static_cast<double>(reply->header().payload_bytes));
    return absl::OkStatus();
  }

  absl::Status Done(const absl::Status& s, int attempt) {
    finished_ = true;
    RecordClientCall(method_, ep_, absl::ToDoubleSeconds(absl::Now() - started_), request_->header.payload_bytes, attempt,
                     s);
    request_.reset();  // the payload is free for its writer again
    if (s.ok() && recovery_.client != nullptr && recovery_.ends_step) {
      recovery_.client->journal_.StepDone(recovery_.trainer, ep_);
    }
    if (s.ok()) return final_ = s;
    final_ = absl::Status(s.code(), absl::StrCat(KindName(kind_), " '", name_, "' to ", ep_, " failed",
                                                 attempt > 0 ? absl::StrCat(" after ", attempt + 1, " attempts") : "",
                                                 ": ", s.message()));
    return final_;
  }

  Transport* transport_;
  RpcKind kind_;
  std::string ep_;
  std::string name_;
  std::string reply_name_;
  std::shared_ptr<const OutgoingMessage> request_;  // released when the call ends
  Variable* out_;
  absl::Time deadline_;
  int retry_times_;
  bool ahead_of_sends_ = false;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> answered_{false};  // done_, for Wait's spin without the lock
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<IncomingMessage> reply_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ReplyReader> reader_ ABSL_GUARDED_BY(mu_);  // the attempt's, if its transport offers one
  bool finished_ = false;  // Wait's own state (one waiting thread)
  absl::Status final_;
  Recovery recovery_;
  int64_t* reply_step_ = nullptr;
  const char* method_;  // the metrics' label (rpc_metrics.h)
  absl::Time started_;
};

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
    : transport_(transport), options_(options), incarnation_(NewIncarnation()) {
  if (options_.deadline_ms <= 0) options_.deadline_ms = FLAGS_rpc_deadline;
  if (options_.retry_times < 0) options_.retry_times = FLAGS_rpc_retry_times;
}

RpcClient::~RpcClient() = default;

std::shared_ptr<RpcCall> RpcClient::Start(RpcKind kind, const std::string& ep, const std::string& name,
                                          const Variable* var, const SendOptions& options, Variable* out,
                                          int64_t* reply_step) {
  if (absl::Status s = CheckEndpoint(ep); !s.ok()) return std::make_shared<FailedCall>(s);
  sendrecv::VariableMessage meta;
  meta.set_varname(name);
  meta.set_trainer_id(options.trainer_id);
  meta.set_out_varname(options.out_varname);
  meta.set_table_name(options.table_name);
  meta.set_oar_replay(options.replay);
  meta.set_oar_step(options.step);
  {
    absl::MutexLock l(&mu_);
    contacted_[options.trainer_id].insert(ep);
    meta.set_oar_seq(static_cast<int64_t>(incarnation_ | ++next_seq_[{options.trainer_id, ep}]));
    if (kind == RpcKind::kSend && !options.replay) {  // BATCH_BARRIER says how many variables it covers
      int64_t& sent = sent_since_barrier_[{options.trainer_id, ep}];
      if (name == kBatchBarrier) {
        meta.set_oar_sent(sent);
        sent = 0;
      } else if (name != kFetchBarrier && name != kComplete && name != kResync) {
        ++sent;
      }
    }
  }
  ClientCall::Recovery recovery;
  if (!options.replay) {  // replays are not journaled and do not recover themselves
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
  if ((kind == RpcKind::kGet || kind == RpcKind::kGetNoBarrier) && out != nullptr && out->IsType<Tensor>()) {
    request->reply_into = out->GetMutable<Tensor>();  // a stream transport may read the value straight into it
  }
  auto call = std::make_shared<ClientCall>(transport_, kind, ep, std::move(request), out,
                                           absl::Now() + absl::Milliseconds(options_.deadline_ms),
                                           options_.retry_times);
  call->set_recovery(recovery);
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

std::shared_ptr<RpcCall> RpcClient::AsyncSendVar(const std::string& ep, const std::string& name, const Variable* var,
                                                 const SendOptions& options) {
  return Start(RpcKind::kSend, ep, name, var, options, nullptr);
}

std::shared_ptr<RpcCall> RpcClient::AsyncGetVar(const std::string& ep, const std::string& name, Variable* out,
                                                int64_t trainer_id, bool no_barrier) {
  return Start(no_barrier ? RpcKind::kGetNoBarrier : RpcKind::kGet, ep, name, nullptr, {.trainer_id = trainer_id},
               out);
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
    if (transport_->KeepsOrder(endpoints[i])) {
      calls[i] = AsyncSendVar(endpoints[i], kBatchBarrier, nullptr, {.trainer_id = trainer_id, .ahead_of_sends = true});
    }
  }
  // A send that failed is the error to report (the trainer stops); the
  // barriers already written are left unwaited.
  OAR_RETURN_IF_ERROR(WaitPending(trainer_id));
  absl::Status first;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    if (calls[i] == nullptr) calls[i] = AsyncSendBatchBarrier(endpoints[i], trainer_id);
  }
  for (auto& c : calls) first.Update(c->Wait());
  return first;
}

std::shared_ptr<RpcCall> RpcClient::AsyncSendFetchBarrier(const std::string& ep, int64_t trainer_id) {
  return AsyncSendVar(ep, kFetchBarrier, nullptr, {.trainer_id = trainer_id});
}
std::shared_ptr<RpcCall> RpcClient::AsyncSendComplete(const std::string& ep, int64_t trainer_id) {
  return AsyncSendVar(ep, kComplete, nullptr, {.trainer_id = trainer_id});
}

std::shared_ptr<RpcCall> RpcClient::AsyncCheckpointNotify(const std::string& ep, const std::string& dir,
                                                          int64_t trainer_id) {
  return Start(RpcKind::kCheckpointNotify, ep, kCheckpointSave, nullptr,
               {.trainer_id = trainer_id, .out_varname = dir}, nullptr);
}

absl::Status RpcClient::WaitServerReady(const std::vector<std::string>& endpoints, int timeout_ms) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  std::vector<std::string> missing;
  for (const auto& ep : endpoints) {
    OAR_RETURN_IF_ERROR(CheckEndpoint(ep));
    if (!transport_->WaitReady(ep, deadline).ok()) missing.push_back(ep);
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("not reachable after ", timeout_ms, " ms: ",
                                                  absl::StrJoin(missing, ", ")));
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
  absl::Status first;
  for (auto& c : calls) first.Update(c->Wait());
  return first;
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
  return env;
}

}  // namespace oar::rpc
