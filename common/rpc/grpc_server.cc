#include "common/rpc/grpc_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_posix.h>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/listen_sockets.h"
#include "common/base/status.h"
#include "common/base/thread_pool.h"
#include "common/rpc/fd_acceptor.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/handler_pools.h"
#include "common/rpc/read_gate.h"
#include "common/rpc/var_serde.h"
#include "glog/logging.h"

namespace oar::rpc {

class GrpcServer::Impl : public grpc::CallbackGenericService {
 public:
  Impl(RpcHandler* handler, const ServerOptions& o, int read_slots)
      : handler_(handler), token_(o.auth_token), pools_(o), gate_(read_slots) {}

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new Call(this, ctx);
  }

  void StopPools() { pools_.Stop(); }

  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<FdAcceptor> acceptor;  // serving a socket handed to the process
  std::string endpoint;

 private:
  // One unary call seen through the bidi reactor: read one request, answer
  // once, delete on done.
  class Call : public grpc::ServerGenericBidiReactor {
   public:
    Call(Impl* impl, grpc::GenericCallbackServerContext* ctx) : impl_(impl) {
      kind_ = -1;
      for (int k = 0; k < kNumRpcKinds; ++k) {
        if (ctx->method() == MethodPath(static_cast<RpcKind>(k))) kind_ = k;
      }
      if (kind_ < 0) {
        Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "unknown method " + ctx->method()));
        return;
      }
      if (!impl_->token_.empty()) {
        auto it = ctx->client_metadata().find(kAuthMetadataKey);
        if (it == ctx->client_metadata().end() || std::string(it->second.data(), it->second.size()) != impl_->token_) {
          Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                              "missing or wrong auth token (the server has OAR_AUTH_TOKEN set)"));
          return;
        }
      }
      if (static_cast<RpcKind>(kind_) != RpcKind::kSend) {
        StartRead(&request_);
        return;
      }
      gated_ = true;  // gradients: read only while the gate has room
      impl_->gate_.Enter(this, [this] {
        holds_slot_ = true;
        StartRead(&request_);
      });
    }
    void OnCancel() override {
      if (gated_ && impl_->gate_.Cancel(this)) {  // still parked: never read
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while waiting to be read"));
      }
    }
    void OnReadDone(bool ok) override {
      if (!ok) {
        ReleaseSlot();
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request message"));
        return;
      }
      if (request_.Length() < ReadGate::kSmallRequestBytes) ReleaseSlot();  // barriers never pin a slot
      const RpcKind kind = static_cast<RpcKind>(kind_);
      if (impl_->handler_->NeverBlocks(kind)) {
        Serve();
        return;
      }
      // A request the handler may answer later (a sync pserver's Get before
      // the step's parameters are ready) is offered to it here, on gRPC's
      // thread: parked, it holds no pool thread, so Gets waiting for a step
      // can never take every thread a later trainer's Get needs.
      if (impl_->handler_->Defers(kind) && TryDefer(kind)) return;
      if (!impl_->pools_.TrySchedule(kind, [this] { Serve(); })) {
        request_.Clear();
        ReleaseSlot();
        Finish(
            grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                         absl::StrCat(impl_->endpoint, ": ", impl_->pools_.max_queued(), " ", KindName(kind),
                                      " requests are already waiting (FLAGS_rpc_max_queued_requests); retry later")));
      }
    }
    void OnWriteDone(bool) override {}
    void OnDone() override {
      ReleaseSlot();
      delete this;
    }

   private:
    // Offers the request to the handler's deferred path; true if taken (the
    // reply is written whenever it answers).
    bool TryDefer(RpcKind kind) {
      auto parsed = ParseMessage(request_);
      if (!parsed.ok()) return false;  // Serve reports the parse error
      std::shared_ptr<const IncomingMessage> req(std::move(*parsed));
      const bool taken = impl_->handler_->TryHandleDeferred(
          kind, req, [this](absl::Status s, Reply reply) { Answer(std::move(s), std::move(reply)); });
      if (taken) request_.Clear();
      return taken;
    }
    void Answer(absl::Status s, Reply reply) {
      ReleaseSlot();
      if (!s.ok()) {
        Finish(ToGrpc(s));
        return;
      }
      sendrecv::VariableMessage meta = Named(reply.name);
      meta.set_oar_step(reply.step);
      auto header = HeaderOf(std::move(meta), reply.var.IsInitialized() ? &reply.var : nullptr);
      absl::StatusOr<grpc::ByteBuffer> out =
          header.ok() ? SerializeMessage(*header, &reply.var) : absl::StatusOr<grpc::ByteBuffer>(header.status());
      if (!out.ok()) {
        Finish(ToGrpc(out.status()));
        return;
      }
      response_ = *std::move(out);
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void Serve() {
      const RpcKind kind = static_cast<RpcKind>(kind_);
      auto req = ParseMessage(request_);
      request_.Clear();  // the message holds its own references to the slices
      if (!req.ok()) {
        ReleaseSlot();
        Finish(ToGrpc(req.status()));
        return;
      }
      Reply reply;
      absl::Status s = impl_->handler_->Handle(kind, **req, &reply);
      req->reset();  // release the request's bytes before the reply is written
      Answer(std::move(s), std::move(reply));
    }
    static sendrecv::VariableMessage Named(const std::string& name) {
      sendrecv::VariableMessage m;
      m.set_varname(name);
      return m;
    }
    void ReleaseSlot() {
      if (holds_slot_) impl_->gate_.Leave();
      holds_slot_ = false;
    }
    Impl* impl_;
    int kind_;
    bool gated_ = false, holds_slot_ = false;
    grpc::ByteBuffer request_, response_;
  };

  RpcHandler* handler_;
  std::string token_;
  HandlerPools pools_;
  ReadGate gate_;
};

namespace {

// Why gRPC cannot listen on `endpoint` (it says only that it could not,
// in a page of log): the error of a plain bind to the same address, or ""
// if that succeeds.
std::string WhyNotBindable(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos) return "";
  std::string host = endpoint.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int rc =
          getaddrinfo(host.empty() ? nullptr : host.c_str(), endpoint.substr(colon + 1).c_str(), &hints, &found);
      rc != 0) {
    return gai_strerror(rc);
  }
  std::string why;
  const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  if (fd >= 0) {
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as gRPC binds
    if (bind(fd, found->ai_addr, found->ai_addrlen) != 0 || listen(fd, 1) != 0) why = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(found);
  return why;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const ServerOptions& options, RpcHandler* handler) {
  OAR_RETURN_IF_ERROR(CheckEndpoint(options.endpoint));
  std::unique_ptr<GrpcServer> s(new GrpcServer());
  const uint64_t cap = MaxRequestBytes(options, *handler);
  const int slots = ReadSlots(options, cap);
  s->impl_ = std::make_unique<Impl>(handler, options, slots);
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  const bool tls = !options.tls_cert.empty() || !options.tls_key.empty();
  if (tls) {
    OAR_ASSIGN_OR_RETURN(std::string cert, ReadTlsFile("rpc_tls_cert", options.tls_cert));
    OAR_ASSIGN_OR_RETURN(std::string key, ReadTlsFile("rpc_tls_key", options.tls_key));
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({key, cert});
    creds = grpc::SslServerCredentials(ssl);
  }
  // A socket handed to the process for this port is served as it is (gRPC
  // takes connected descriptors only, so this server accepts them); TLS
  // needs gRPC's own listener, which then binds the port afresh.
  int port = 0;
  (void)absl::SimpleAtoi(options.endpoint.substr(options.endpoint.rfind(':') + 1), &port);
  int handed = TakeListenSocket(port);
  if (handed >= 0 && tls) {
    ::close(handed);
    handed = -1;
  }
  if (handed < 0) builder.AddListeningPort(options.endpoint, creds, &s->port_);
  builder.SetMaxReceiveMessageSize(cap == 0 || cap > INT_MAX ? -1 : static_cast<int>(cap));
  builder.SetMaxSendMessageSize(-1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 * 1024 * 1024);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterCallbackGenericService(s->impl_.get());
  if (handed >= 0) {
    s->impl_->server = builder.BuildAndStart();
    if (s->impl_->server == nullptr) {
      ::close(handed);
      return absl::UnavailableError(absl::StrCat("cannot serve ", options.endpoint,
                                                 " on the socket handed to this process: gRPC refused to start"));
    }
    s->port_ = port;
    grpc::Server* server = s->impl_->server.get();
    s->impl_->acceptor =
        std::make_unique<FdAcceptor>(handed, [server](int conn) { grpc::AddInsecureChannelFromFd(server, conn); });
  } else {
    // A plain bind first: where it fails, gRPC would fail too, after a page
    // of its own log; the error alone says it in a line.
    std::string why = WhyNotBindable(options.endpoint);
    if (why.empty()) {
      s->impl_->server = builder.BuildAndStart();
      if (s->impl_->server == nullptr || s->port_ == 0) why = WhyNotBindable(options.endpoint);
    }
    if (s->impl_->server == nullptr || s->port_ == 0) {
      return absl::UnavailableError(absl::StrCat(
          "cannot listen on ", options.endpoint, ": ", why.empty() ? "gRPC refused it (see its log above)" : why,
          why == std::strerror(EADDRINUSE) ? " (something else listens there)" : ""));
    }
  }
  s->endpoint_ = absl::StrCat(options.endpoint.substr(0, options.endpoint.rfind(':')), ":", s->port_);
  s->impl_->endpoint = s->endpoint_;
  LOG(INFO) << "RPC server listening on " << s->endpoint_ << (handed >= 0 ? " (a socket handed to this process)" : "")
            << (cap > 0 ? absl::StrCat(" (requests up to ", cap, " bytes, ", slots, " read at once)") : "");
  return s;
}

void GrpcServer::Shutdown() {
  if (impl_ == nullptr || impl_->server == nullptr) return;
  if (impl_->acceptor != nullptr) impl_->acceptor->Stop();  // no new connections first
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  impl_->StopPools();
  impl_->server.reset();
}

GrpcServer::~GrpcServer() { Shutdown(); }

}  // namespace oar::rpc
