#include "common/rpc/inprocess_transport.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/rpc/handler_pools.h"

namespace oar::rpc {
namespace {

// Ends one call once: with the handler's answer or at the deadline.
// The deadline's timer entry is cancelled when the handler answers first.
struct Outcome {
  absl::Mutex mu;
  bool fired ABSL_GUARDED_BY(mu) = false;
  uint64_t timer_id ABSL_GUARDED_BY(mu) = 0;
  Timer* timer = nullptr;
  CallDone done;
  void Fire(absl::Status s, std::unique_ptr<IncomingMessage> reply) {
    uint64_t id;
    {
      absl::MutexLock l(&mu);
      if (fired) return;
      fired = true;
      id = timer_id;
    }
    if (id != 0) timer->Cancel(id);
    CallDone d = std::move(done);
    d(std::move(s), std::move(reply));
  }
  void SetTimer(uint64_t id) {
    {
      absl::MutexLock l(&mu);
      if (!fired) {
        timer_id = id;
        return;
      }
    }
    timer->Cancel(id);
  }
};

}  // namespace

class InProcessTransport::Server : public Listener {
 public:
  Server(InProcessTransport* net, std::string endpoint, RpcHandler* handler, const ServerOptions& o)
      : net_(net),
        endpoint_(std::move(endpoint)),
        handler_(handler),
        pools_(o),
        max_bytes_(MaxRequestBytes(o, *handler)) {}
  ~Server() override { Shutdown(); }
  const std::string& endpoint() const override { return endpoint_; }
  void Shutdown() override {
    if (net_ == nullptr) return;
    net_->Remove(endpoint_, this);
    net_ = nullptr;
    pools_.Stop();  // queued calls still run: their waits were released by the owner
  }

  void Disconnect() { down_ = true; }

  void Serve(RpcKind kind, std::shared_ptr<const OutgoingMessage> request, std::shared_ptr<Outcome> outcome) {
    if (max_bytes_ > 0 && request->header.payload_bytes > max_bytes_) {
      outcome->Fire(
          absl::ResourceExhaustedError(absl::StrCat(endpoint_, ": a message of ", request->header.payload_bytes,
                                                    " bytes is larger than the limit of ", max_bytes_)),
          nullptr);
      return;
    }
    auto work = [this, kind, request, outcome] {
      InMemoryMessage msg(request->header, request->var);
      Reply reply;
      absl::Status s = handler_->Handle(kind, msg, &reply);
      if (down_) {
        outcome->Fire(absl::UnavailableError(absl::StrCat("connection to ", endpoint_, " reset")), nullptr);
        return;
      }
      if (!s.ok()) {
        outcome->Fire(std::move(s), nullptr);
        return;
      }
      sendrecv::VariableMessage meta;
      meta.set_varname(reply.name);
      meta.set_oar_step(reply.step);
      auto header = HeaderOf(std::move(meta), reply.var.IsInitialized() ? &reply.var : nullptr);
      if (!header.ok()) {
        outcome->Fire(header.status(), nullptr);
        return;
      }
      outcome->Fire(absl::OkStatus(), std::make_unique<InMemoryMessage>(*std::move(header), std::move(reply.var)));
    };
    // A kind that never blocks shares the no-barrier Gets' pool (gRPC would
    // run it on its own thread).
    if (!pools_.TrySchedule(handler_->NeverBlocks(kind) ? RpcKind::kGetNoBarrier : kind, work)) {
      if (pools_.stopped()) {  // found just before it shut down
        outcome->Fire(absl::UnavailableError(absl::StrCat(endpoint_, " is shutting down")), nullptr);
        return;
      }
      outcome->Fire(absl::ResourceExhaustedError(absl::StrCat(endpoint_, ": ", pools_.max_queued(), " ", KindName(kind),
                                                              " requests are already waiting; retry later")),
                    nullptr);
    }
  }

 private:
  InProcessTransport* net_;
  std::string endpoint_;
  RpcHandler* handler_;
  std::atomic<bool> down_{false};
  HandlerPools pools_;
  uint64_t max_bytes_ = 0;
};

namespace {

// The listener handed out: shuts its server down when destroyed.
class ServerHandle : public Listener {
 public:
  explicit ServerHandle(std::shared_ptr<Listener> server) : server_(std::move(server)) {}
  ~ServerHandle() override { server_->Shutdown(); }
  const std::string& endpoint() const override { return server_->endpoint(); }
  void Shutdown() override { server_->Shutdown(); }

 private:
  std::shared_ptr<Listener> server_;
};

}  // namespace

InProcessTransport::InProcessTransport(RpcOptions options) : Transport(std::move(options)) {}
InProcessTransport::~InProcessTransport() = default;

void InProcessTransport::Call(RpcKind kind, const std::string& ep, std::shared_ptr<const OutgoingMessage> request,
                              absl::Time deadline, CallDone done) {
  std::shared_ptr<Server> server;
  {
    absl::MutexLock l(&mu_);
    auto it = servers_.find(ep);
    if (it != servers_.end()) server = it->second;
  }
  if (server == nullptr) {
    done(absl::UnavailableError(absl::StrCat("connection to ", ep, " refused (nothing serves it in this process)")),
         nullptr);
    return;
  }
  auto outcome = std::make_shared<Outcome>();
  outcome->done = std::move(done);
  outcome->timer = &timer_;
  server->Serve(kind, std::move(request), outcome);
  std::weak_ptr<Outcome> weak = outcome;
  outcome->SetTimer(timer_.At(deadline, [weak] {
    if (auto o = weak.lock()) o->Fire(absl::DeadlineExceededError("deadline exceeded"), nullptr);
  }));
}

absl::Status InProcessTransport::WaitReady(const std::string& ep, absl::Time deadline) {
  OAR_RETURN_IF_ERROR(CheckEndpoint(ep));
  absl::MutexLock l(&mu_);
  struct Served {
    InProcessTransport* t;
    const std::string* ep;
  } s{this, &ep};
  if (mu_.AwaitWithDeadline(
          absl::Condition(
              +[](Served* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->t->servers_.count(*s->ep) > 0; }, &s),
          deadline)) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat(ep, " accepted no connection"));
}

absl::StatusOr<std::unique_ptr<Listener>> InProcessTransport::Listen(const ServerOptions& options,
                                                                     RpcHandler* handler) {
  OAR_RETURN_IF_ERROR(CheckEndpoint(options.endpoint));
  std::string ep = options.endpoint;
  absl::MutexLock l(&mu_);
  if (ep.substr(ep.rfind(':') + 1) == "0") {
    while (servers_.count(absl::StrCat(ep.substr(0, ep.rfind(':')), ":", next_port_))) ++next_port_;
    ep = absl::StrCat(ep.substr(0, ep.rfind(':')), ":", next_port_++);
  }
  if (servers_.count(ep)) return absl::UnavailableError(absl::StrCat("cannot listen on ", ep, " (address in use)"));
  auto server = std::make_shared<Server>(this, ep, handler, options);
  servers_[ep] = server;
  return std::unique_ptr<Listener>(new ServerHandle(server));
}

void InProcessTransport::Disconnect(const std::string& ep) {
  std::shared_ptr<Server> server;
  {
    absl::MutexLock l(&mu_);
    auto it = servers_.find(ep);
    if (it == servers_.end()) return;
    server = it->second;
    servers_.erase(it);
  }
  server->Disconnect();
}

void InProcessTransport::Remove(const std::string& endpoint, const Listener* server) {
  absl::MutexLock l(&mu_);
  auto it = servers_.find(endpoint);
  if (it != servers_.end() && it->second.get() == server) servers_.erase(it);  // not a successor's
}

}  // namespace oar::rpc
