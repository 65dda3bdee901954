// ClientCall: one RPC of an RpcClient with its retries (internal to
// rpc_client.cc, which creates and starts them). An attempt runs on the
// transport's threads; the retry decision happens in Wait, on the caller's
// thread; an ABORTED from a restarted pserver goes through the client's
// StepJournal (Recovery) before the call is tried again.
//
// Thread-safety: one thread waits (Wait); the transport's threads finish
// attempts (guarded by mu_).
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/base/status.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_metrics.h"

namespace oar::rpc {

// One RPC with its retries. An attempt runs on the transport's threads; the
// retry decision happens in Wait, on the caller's thread.
class ClientCall : public RpcCall, public std::enable_shared_from_this<ClientCall> {
 public:
  ClientCall(Transport* transport, RpcKind kind, std::string ep, std::shared_ptr<const OutgoingMessage> request,
             Variable* out, absl::Time deadline, int retry_times)
      : transport_(transport),
        kind_(kind),
        ep_(std::move(ep)),
        name_(request->header.name()),
        // A prefetch is answered with the rows, named as the request's out_varname (Fluid's).
        reply_name_(kind == RpcKind::kPrefetch ? request->header.meta.out_varname() : name_),
        request_(std::move(request)),
        out_(out),
        deadline_(deadline),
        retry_times_(retry_times),
        method_(MethodLabel(kind, name_)),
        started_(absl::Now()) {}

  // How the call recovers from a restarted pserver (see StepJournal).
  struct Recovery {
    RpcClient* client = nullptr;  // null: no recovery (RESYNC and replayed messages)
    int64_t trainer = 0;
    int64_t resyncs_seen = 0;
    bool ends_step = false;  // FETCH_BARRIER: OK ends the trainer's step with ep
  };
  void set_recovery(Recovery r) { recovery_ = r; }
  // The client whose ClientOptions::await_restarts this call keeps to.
  void set_owner(RpcClient* c) { owner_ = c; }
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
    std::unique_ptr<ReplyReader> reader = transport_->CallForWaiter(
        kind_, ep_, request_, deadline_, [self](absl::Status s, std::unique_ptr<IncomingMessage> reply) {
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
      } else if (const int spin_us = SpinMicros(transport_->options().wait_spin_us); spin_us > 0) {
        // A reply that comes within a few microseconds is taken without
        // sleeping (RpcOptions::wait_spin_us): a sleeping thread's wake-up can
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
      if (absl::IsUnavailable(s) && owner_ != nullptr && owner_->options_.await_restarts &&
          left > absl::ZeroDuration()) {
        // Maybe restarting (a checkpointing job): tried until the deadline,
        // whatever retry_times says; at least once a second.
        if (!awaited_) owner_->SayUnreachable(ep_, s, owner_->deadline_ms());
        awaited_ = true;
        absl::SleepFor(std::min(backoff, left));
        backoff = std::min(backoff * 2, absl::Seconds(1));
        StartAttempt();
        continue;
      }
      if (awaited_ && !absl::IsUnavailable(s) && s.code() != absl::StatusCode::kDeadlineExceeded) {
        owner_->SayReachable(ep_);
        awaited_ = false;
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
    RecordClientCall(method_, ep_, absl::ToDoubleSeconds(absl::Now() - started_), request_->header.payload_bytes,
                     attempt, s);
    request_.reset();  // the payload is free for its writer again
    if (s.ok() && recovery_.client != nullptr && recovery_.ends_step) {
      recovery_.client->journal_.StepDone(recovery_.trainer, ep_);
    }
    if (s.ok()) return final_ = s;
    // A server that refused an earlier call and cannot be reached now most
    // likely stopped for the reason it gave: say it.
    std::string before;
    if (RpcClient* c = recovery_.client; c != nullptr) {
      absl::MutexLock l(&c->mu_);
      if (IsRefusal(s)) {
        c->refused_[ep_] = std::string(s.message());
      } else if (auto it = c->refused_.find(ep_); it != c->refused_.end()) {
        before = absl::StrCat("; before that it answered: ", it->second);
      }
    }
    final_ = Rewrap(s, absl::StrCat(KindName(kind_), " '", name_, "' to ", ep_, " failed",
                                    attempt > 0 ? absl::StrCat(" after ", attempt + 1, " attempts") : "", ": ",
                                    s.message(), before));
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
  bool finished_ = false;                                     // Wait's own state (one waiting thread)
  absl::Status final_;
  Recovery recovery_;
  RpcClient* owner_ = nullptr;
  bool awaited_ = false;  // an attempt found the server unreachable and the call waited for it
  int64_t* reply_step_ = nullptr;
  const char* method_;  // the metrics' label (rpc_metrics.h)
  absl::Time started_;
};

}  // namespace oar::rpc
