#include "common/rpc/transport_select.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "common/base/status.h"
#include "common/rpc/stream/stream_server.h"
#include "glog/logging.h"

namespace oar::rpc {
namespace {

// The gRPC handler of a server that also serves the stream transports: it
// answers the offer question itself and passes everything else on.
class OfferingHandler final : public RpcHandler {
 public:
  OfferingHandler(RpcHandler* inner, std::string offer) : inner_(inner), offer_(std::move(offer)) {}
  absl::Status Handle(RpcKind kind, const IncomingMessage& request, Reply* reply) override {
    if (kind != RpcKind::kGetNoBarrier || request.header().name() != kTransportOffer) {
      return inner_->Handle(kind, request, reply);
    }
    reply->name = kTransportOffer;
    Tensor* t = reply->var.GetMutable<Tensor>();
    auto* p = t->mutable_data<uint8_t>({static_cast<int64_t>(offer_.size())});
    std::copy(offer_.begin(), offer_.end(), p);
    return absl::OkStatus();
  }
  bool NeverBlocks(RpcKind kind) const override { return inner_->NeverBlocks(kind); }
  bool Defers(RpcKind kind) const override { return inner_->Defers(kind); }
  bool TryHandleDeferred(RpcKind kind, std::shared_ptr<const IncomingMessage> request,
                         const Respond& respond) override {
    return inner_->TryHandleDeferred(kind, std::move(request), respond);
  }
  uint64_t MaxRequestBytes() const override { return inner_->MaxRequestBytes(); }

 private:
  RpcHandler* inner_;
  const std::string offer_;
};

// gRPC for Fluid and control, the stream server beside it.
class DualListener final : public Listener {
 public:
  DualListener(std::unique_ptr<OfferingHandler> handler, std::unique_ptr<stream::StreamServer> stream,
               std::unique_ptr<Listener> grpc)
      : handler_(std::move(handler)), stream_(std::move(stream)), grpc_(std::move(grpc)) {}
  ~DualListener() override { Shutdown(); }
  const std::string& endpoint() const override { return grpc_->endpoint(); }
  void Shutdown() override {
    stream_->Shutdown();
    grpc_->Shutdown();
  }

 private:
  std::unique_ptr<OfferingHandler> handler_;
  std::unique_ptr<stream::StreamServer> stream_;
  std::unique_ptr<Listener> grpc_;
};

}  // namespace

absl::StatusOr<TransportMode> ParseTransportMode(const std::string& s) {
  if (s == "auto") return TransportMode::kAuto;
  if (s == "grpc") return TransportMode::kGrpc;
  if (s == "tcp") return TransportMode::kTcp;
  if (s == "shm") return TransportMode::kShm;
  return absl::InvalidArgumentError(absl::StrCat("--rpc_transport=", s, ": choose auto, grpc, tcp or shm"));
}

const char* TransportModeName(TransportMode m) {
  switch (m) {
    case TransportMode::kAuto:
      return "auto";
    case TransportMode::kGrpc:
      return "grpc";
    case TransportMode::kTcp:
      return "tcp";
    case TransportMode::kShm:
      return "shm";
  }
  return "?";
}

SelectingTransport::SelectingTransport(TransportMode mode, RpcOptions options)
    : Transport(options), mode_(mode), tls_(!options.tls_ca.empty()), grpc_(options), stream_(options) {}

SelectingTransport::~SelectingTransport() = default;

absl::StatusOr<std::unique_ptr<Listener>> SelectingTransport::Listen(const ServerOptions& options,
                                                                     RpcHandler* handler) {
  if (mode_ == TransportMode::kGrpc) return grpc_.Listen(options, handler);
  OAR_ASSIGN_OR_RETURN(auto stream, stream::StreamServer::Start(options, this->options(), handler, /*shm=*/true));
  std::string offer = absl::StrCat("tcp=", stream->tcp_port());
  if (stream->tls()) absl::StrAppend(&offer, " tls");
  if (!stream->shm_name().empty()) absl::StrAppend(&offer, " shm=", stream->shm_name());
  auto offering = std::make_unique<OfferingHandler>(handler, offer);
  OAR_ASSIGN_OR_RETURN(auto grpc, grpc_.Listen(options, offering.get()));
  LOG(INFO) << "stream transports of " << grpc->endpoint() << ": " << offer;
  return std::unique_ptr<Listener>(new DualListener(std::move(offering), std::move(stream), std::move(grpc)));
}

absl::StatusOr<SelectingTransport::Choice> SelectingTransport::Negotiate(const std::string& ep, absl::Time deadline) {
  Choice grpc_choice;
  if (mode_ == TransportMode::kGrpc) return grpc_choice;
  // Ask the server over gRPC what it offers.
  auto request = std::make_shared<OutgoingMessage>();
  sendrecv::VariableMessage meta;
  meta.set_varname(kTransportOffer);
  OAR_ASSIGN_OR_RETURN(request->header, HeaderOf(std::move(meta), nullptr));
  absl::Notification answered;
  absl::Status status;
  std::string offer;
  grpc_.Call(
      RpcKind::kGetNoBarrier, ep, request, deadline, [&](absl::Status s, std::unique_ptr<IncomingMessage> reply) {
        if (s.ok() && reply->header().kind == PayloadKind::kTensor && reply->header().dtype == DataType::kUInt8) {
          offer.resize(reply->header().payload_bytes);
          reply->CopyPayload(offer.data());
        } else if (s.ok()) {
          s = absl::InvalidArgumentError("not an offer");
        }
        status = s;
        answered.Notify();
      });
  answered.WaitForNotification();
  if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) || absl::IsUnauthenticated(status)) {
    return status;  // not up yet, or not ours to talk to: decide later
  }
  int tcp_port = 0;
  bool tls = false;
  std::string shm;
  if (status.ok()) {
    for (absl::string_view item : absl::StrSplit(offer, ' ', absl::SkipEmpty())) {
      if (absl::ConsumePrefix(&item, "tcp=")) (void)absl::SimpleAtoi(item, &tcp_port);
      if (absl::ConsumePrefix(&item, "shm=")) shm = std::string(item);
      if (item == "tls") tls = true;
    }
  }
  const std::string host = ep.substr(0, ep.rfind(':'));
  std::string why = status.ok() ? "" : absl::StrCat("it offers no stream transport (", status.message(), ")");
  if (tcp_port > 0 && tls != tls_) {  // both ends TLS, or neither
    why = tls ? "its stream port is TLS and --rpc_tls_ca is not set"
              : "its stream port is not TLS and --rpc_tls_ca is set";
    tcp_port = 0;
  }
  if (mode_ == TransportMode::kAuto || mode_ == TransportMode::kShm) {
    if (!shm.empty()) {
      Choice c{false, {stream::Route::kShm, shm, ep}};
      absl::Status s = stream_.Connect(c.route, deadline);
      if (s.ok()) return c;
      why = std::string(s.message());
    } else if (why.empty()) {
      why = tls ? "it offers no shared memory (it serves TLS)" : "it offers no shared memory";
    }
    if (mode_ == TransportMode::kShm) {
      return absl::FailedPreconditionError(
          absl::StrCat("--rpc_transport=shm: cannot use shared memory with ", ep, ": ", why));
    }
  }
  if (tcp_port > 0) {
    Choice c{false, {stream::Route::kTcp, absl::StrCat(host, ":", tcp_port), ep}};
    absl::Status s = stream_.Connect(c.route, deadline);
    if (s.ok()) return c;
    if (mode_ == TransportMode::kTcp) return s;
    why = std::string(s.message());
  }
  if (mode_ == TransportMode::kTcp) {
    return absl::FailedPreconditionError(absl::StrCat("--rpc_transport=tcp: ", ep, ": ", why));
  }
  LOG(WARNING) << "rpc transport to " << ep << ": gRPC, because " << why;
  return grpc_choice;
}

absl::StatusOr<SelectingTransport::Choice> SelectingTransport::Choose(const std::string& ep, absl::Time deadline) {
  {
    absl::MutexLock l(&mu_);
    auto it = chosen_.find(ep);
    if (it != chosen_.end()) return it->second;
  }
  OAR_ASSIGN_OR_RETURN(Choice c, Negotiate(ep, deadline));
  absl::MutexLock l(&mu_);
  auto [it, fresh] = chosen_.emplace(ep, c);
  if (fresh && mode_ != TransportMode::kGrpc) {
    LOG(INFO) << "rpc transport to " << ep << ": "
              << (c.grpc ? std::string("grpc") : absl::StrCat(c.route.Key(), " (--rpc_transport=", Name(), ")"));
  }
  return it->second;
}

std::string SelectingTransport::ChosenFor(const std::string& ep) {
  absl::MutexLock l(&mu_);
  auto it = chosen_.find(ep);
  if (it == chosen_.end()) return "";
  if (it->second.grpc) return "grpc";
  return it->second.route.kind == stream::Route::kShm ? "shm" : "tcp";
}

void SelectingTransport::Call(RpcKind kind, const std::string& ep, std::shared_ptr<const OutgoingMessage> request,
                              absl::Time deadline, CallDone done) {
  CallForWaiter(kind, ep, std::move(request), deadline, std::move(done));  // nobody waits: the reader goes
}

std::unique_ptr<ReplyReader> SelectingTransport::CallForWaiter(RpcKind kind, const std::string& ep,
                                                               std::shared_ptr<const OutgoingMessage> request,
                                                               absl::Time deadline, CallDone done) {
  std::unique_ptr<ReplyReader> reader;
  auto c = Choose(ep, deadline);
  if (!c.ok()) {
    done(c.status(), nullptr);
  } else if (c->grpc) {
    // Its caller may wait on gRPC first: the stream servers it left asleep
    // (a mixed burst) are woken now, not by the next sweep.
    stream_.PayDebts();
    grpc_.Call(kind, ep, std::move(request), deadline, std::move(done));
  } else {
    // A server that cannot be reached where it said (it died; a restarted
    // one listens elsewhere) is asked again on the next attempt.
    absl::Status s =
        stream_.Call(kind, c->route, std::move(request), deadline, std::move(done), &reader);  // moved only on OK
    if (!s.ok()) {
      {
        absl::MutexLock l(&mu_);
        chosen_.erase(ep);
      }
      done(absl::IsUnauthenticated(s) ? s : absl::UnavailableError(s.message()), nullptr);
    }
  }
  return reader;
}

absl::Status SelectingTransport::WaitReady(const std::string& ep, absl::Time deadline) {
  OAR_RETURN_IF_ERROR(grpc_.WaitReady(ep, deadline));
  while (true) {
    auto c = Choose(ep, deadline);
    if (c.ok() || !(absl::IsUnavailable(c.status()) || absl::IsDeadlineExceeded(c.status())) ||
        absl::Now() >= deadline) {
      return c.status();
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const RpcOptions& options) {
  OAR_ASSIGN_OR_RETURN(TransportMode mode, ParseTransportMode(options.transport));
  return std::unique_ptr<Transport>(new SelectingTransport(mode, options));
}

}  // namespace oar::rpc
