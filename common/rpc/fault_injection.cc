#include "common/rpc/fault_injection.h"

#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/fingerprint.h"
#include "common/base/status.h"
#include "glog/logging.h"

namespace oar::rpc {
namespace {

uint64_t Mix(uint64_t h, uint64_t v) {  // splitmix64 step over h ^ v
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

enum What { kDropRequest, kDropReply, kDuplicate, kDelay, kDelayAmount, kReorder, kFail, kCopyDelay };

}  // namespace

struct FaultInjectingTransport::Held {
  RpcKind kind;
  std::shared_ptr<const OutgoingMessage> request;
  absl::Time deadline;
  CallDone done;
  bool lose_reply;
};

absl::StatusOr<FaultSpec> FaultSpec::Parse(const std::string& text) {
  FaultSpec spec;
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    auto bad = [&] {
      return absl::InvalidArgumentError(absl::StrCat("--rpc_fault_injection: '", entry,
                                                     "' is not one of seed=N, max_delay_ms=N, drop_request=P, "
                                                     "drop_reply=P, duplicate=P, delay=P, reorder=P, fail=P"));
    };
    double p = 0;
    int64_t n = 0;
    if (kv.first == "seed" && absl::SimpleAtoi(kv.second, &n)) {
      spec.seed = static_cast<uint64_t>(n);
      continue;
    }
    if (kv.first == "max_delay_ms" && absl::SimpleAtoi(kv.second, &n) && n >= 0) {
      spec.max_delay = absl::Milliseconds(n);
      continue;
    }
    if (!absl::SimpleAtod(kv.second, &p) || p < 0 || p > 1) return bad();
    if (kv.first == "drop_request")
      spec.drop_request = p;
    else if (kv.first == "drop_reply")
      spec.drop_reply = p;
    else if (kv.first == "duplicate")
      spec.duplicate = p;
    else if (kv.first == "delay")
      spec.delay = p;
    else if (kv.first == "reorder")
      spec.reorder = p;
    else if (kv.first == "fail")
      spec.fail = p;
    else
      return bad();
  }
  return spec;
}

std::string FaultStats::ToString() const {
  return absl::StrCat(calls, " calls: ", dropped_requests, " requests dropped, ", dropped_replies, " replies dropped, ",
                      duplicated, " duplicated, ", delayed, " delayed, ", reordered, " reordered, ", failed, " failed");
}

FaultInjectingTransport::FaultInjectingTransport(Transport* inner, FaultSpec spec)
    : Transport(inner->options()), inner_(inner), spec_(spec) {}

FaultInjectingTransport::~FaultInjectingTransport() {
  // Held and delayed calls still owe their callers an answer: let them go.
  std::vector<std::string> eps;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [ep, h] : held_) eps.push_back(ep);
  }
  for (const auto& ep : eps) ReleaseHeld(ep);
  while (in_flight_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // What was done to this process's calls, so a run under faults shows that
  // they fired (a test that injected none would prove nothing).
  LOG(WARNING) << "RPC faults injected: " << stats().ToString();
}

double FaultInjectingTransport::Draw(uint64_t message, int what) const {
  return static_cast<double>(Mix(message, static_cast<uint64_t>(what)) >> 11) * 0x1.0p-53;
}

FaultStats FaultInjectingTransport::stats() const {
  absl::MutexLock l(&mu_);
  return stats_;
}

void FaultInjectingTransport::Forward(RpcKind kind, const std::string& ep,
                                      std::shared_ptr<const OutgoingMessage> request, absl::Time deadline,
                                      CallDone done, bool lose_reply, std::unique_ptr<ReplyReader>* reader) {
  ++in_flight_;
  CallDone wrapped = [this, lose_reply, done = std::move(done)](absl::Status s,
                                                                std::unique_ptr<IncomingMessage> reply) {
    if (lose_reply && s.ok()) {
      done(absl::UnavailableError("injected fault: the reply was lost"), nullptr);
    } else {
      done(std::move(s), std::move(reply));
    }
    --in_flight_;
  };
  if (reader != nullptr) {
    *reader = inner_->CallForWaiter(kind, ep, std::move(request), deadline, std::move(wrapped));
  } else {
    inner_->Call(kind, ep, std::move(request), deadline, std::move(wrapped));
  }
}

void FaultInjectingTransport::ReleaseHeld(const std::string& ep) {
  std::unique_ptr<Held> h;
  {
    absl::MutexLock l(&mu_);
    auto it = held_.find(ep);
    if (it == held_.end()) return;
    h = std::move(it->second);
    held_.erase(it);
  }
  Forward(h->kind, ep, std::move(h->request), h->deadline, std::move(h->done), h->lose_reply);
  --in_flight_;  // the hold's own count
}

void FaultInjectingTransport::Call(RpcKind kind, const std::string& ep, std::shared_ptr<const OutgoingMessage> request,
                                   absl::Time deadline, CallDone done) {
  CallForWaiter(kind, ep, std::move(request), deadline, std::move(done));  // nobody waits: the reader goes
}

std::unique_ptr<ReplyReader> FaultInjectingTransport::CallForWaiter(RpcKind kind, const std::string& ep,
                                                                    std::shared_ptr<const OutgoingMessage> request,
                                                                    absl::Time deadline, CallDone done) {
  const auto& meta = request->header.meta;
  int attempt;
  {
    absl::MutexLock l(&mu_);
    attempt = attempts_[{ep, static_cast<int>(kind), meta.varname(), meta.trainer_id(), meta.oar_seq()}]++;
    ++stats_.calls;
  }
  uint64_t m = Mix(spec_.seed, Fingerprint(ep));
  m = Mix(m, static_cast<uint64_t>(kind));
  m = Mix(m, Fingerprint(meta.varname()));
  m = Mix(m, static_cast<uint64_t>(meta.trainer_id()));
  m = Mix(m, static_cast<uint64_t>(meta.oar_seq()));
  m = Mix(m, static_cast<uint64_t>(attempt));
  auto count = [this](int64_t FaultStats::*field) {
    absl::MutexLock l(&mu_);
    ++(stats_.*field);
  };
  if (Draw(m, kFail) < spec_.fail) {
    count(&FaultStats::failed);
    done(absl::InternalError(
             absl::StrCat("injected fault: ", KindName(kind), " '", meta.varname(), "' to ", ep, " failed")),
         nullptr);
    ReleaseHeld(ep);
    return nullptr;
  }
  if (Draw(m, kDropRequest) < spec_.drop_request) {
    count(&FaultStats::dropped_requests);
    done(absl::UnavailableError("injected fault: the request was dropped"), nullptr);
    ReleaseHeld(ep);
    return nullptr;
  }
  const bool lose_reply = Draw(m, kDropReply) < spec_.drop_reply;
  if (lose_reply) count(&FaultStats::dropped_replies);
  if (Draw(m, kDuplicate) < spec_.duplicate) {
    count(&FaultStats::duplicated);
    const absl::Duration after = spec_.max_delay * Draw(m, kCopyDelay);
    ++in_flight_;
    // Nobody waits for the copy: it must not write into the caller's tensor,
    // nor, going out after the call ended, into the slot its payload was
    // lent from, which holds the variable's next value by then.
    auto copy = request;
    if (request->reply_into != nullptr || request->lend_payload) {
      auto own = std::make_shared<OutgoingMessage>(*request);
      own->reply_into = nullptr;
      own->lend_payload = false;
      copy = std::move(own);
    }
    timer_.At(absl::Now() + after, [this, kind, ep, copy, deadline] {
      Forward(
          kind, ep, copy, deadline, [](absl::Status, std::unique_ptr<IncomingMessage>) {}, false);
      --in_flight_;
    });
  }
  if (Draw(m, kReorder) < spec_.reorder) {
    count(&FaultStats::reordered);
    ++in_flight_;
    std::unique_ptr<Held> previous;  // at most one held per endpoint: the one before goes out now
    {
      absl::MutexLock l(&mu_);
      previous = std::move(held_[ep]);
      held_[ep] = std::make_unique<Held>(Held{kind, std::move(request), deadline, std::move(done), lose_reply});
    }
    if (previous != nullptr) {
      Forward(previous->kind, ep, std::move(previous->request), previous->deadline, std::move(previous->done),
              previous->lose_reply);
      --in_flight_;
    }
    timer_.At(absl::Now() + spec_.max_delay, [this, ep] { ReleaseHeld(ep); });
    return nullptr;
  }
  if (Draw(m, kDelay) < spec_.delay) {
    count(&FaultStats::delayed);
    const absl::Duration d = spec_.max_delay * Draw(m, kDelayAmount);
    ++in_flight_;
    timer_.At(absl::Now() + d, [this, kind, ep, request, deadline, done = std::move(done), lose_reply]() mutable {
      Forward(kind, ep, std::move(request), deadline, std::move(done), lose_reply);
      ReleaseHeld(ep);
      --in_flight_;
    });
    return nullptr;
  }
  std::unique_ptr<ReplyReader> reader;
  Forward(kind, ep, std::move(request), deadline, std::move(done), lose_reply, &reader);
  ReleaseHeld(ep);  // a held call goes out after this one: the two arrive swapped
  return reader;
}

absl::StatusOr<Transport*> MaybeInjectFaults(Transport* inner, std::unique_ptr<Transport>* holder) {
  const std::string& schedule = inner->options().fault_injection;
  if (schedule.empty()) return inner;
  OAR_ASSIGN_OR_RETURN(FaultSpec spec, FaultSpec::Parse(schedule));
  LOG(WARNING) << "injecting RPC faults (--rpc_fault_injection=" << schedule << ")";
  *holder = std::make_unique<FaultInjectingTransport>(inner, spec);
  return holder->get();
}

}  // namespace oar::rpc
