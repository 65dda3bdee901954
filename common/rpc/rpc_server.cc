#include "common/rpc/rpc_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "glog/logging.h"

namespace oar::rpc {

class RpcServer::Impl : public grpc::CallbackGenericService {
 public:
  Impl(RpcHandler* handler, const ServerOptions& o) : handler_(handler), token_(o.auth_token) {
    auto n = [](int v, int flag) { return v > 0 ? v : std::max(1, flag); };
    pools_[static_cast<int>(RpcKind::kSend)] = std::make_unique<ThreadPool>(n(o.send_threads, FLAGS_rpc_send_thread_num));
    pools_[static_cast<int>(RpcKind::kGet)] = std::make_unique<ThreadPool>(n(o.get_threads, FLAGS_rpc_get_thread_num));
    pools_[static_cast<int>(RpcKind::kGetNoBarrier)] = std::make_unique<ThreadPool>(2);
    pools_[static_cast<int>(RpcKind::kPrefetch)] =
        std::make_unique<ThreadPool>(n(o.prefetch_threads, FLAGS_rpc_prefetch_thread_num));
    pools_[static_cast<int>(RpcKind::kCheckpointNotify)] = std::make_unique<ThreadPool>(1);
  }

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new Call(this, ctx);
  }

  void StopPools() {
    for (auto& p : pools_) p.reset();
  }

  std::unique_ptr<grpc::Server> server;

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
        if (it == ctx->client_metadata().end() ||
            std::string(it->second.data(), it->second.size()) != impl_->token_) {
          Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                              "missing or wrong auth token (the server has OAR_AUTH_TOKEN set)"));
          return;
        }
      }
      StartRead(&request_);
    }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request message"));
        return;
      }
      if (impl_->handler_->NeverBlocks(static_cast<RpcKind>(kind_))) {
        Serve();
      } else {
        impl_->pools_[kind_]->Schedule([this] { Serve(); });
      }
    }
    void OnWriteDone(bool) override {}
    void OnDone() override { delete this; }

   private:
    void Serve() {
      const RpcKind kind = static_cast<RpcKind>(kind_);
      auto req = DeserializeVar(request_, [this, kind](const sendrecv::VariableMessage& meta) {
        return impl_->handler_->SpareBuffer(kind, meta);
      });
      request_.Clear();  // release gRPC's copy of the payload now
      if (!req.ok()) {
        Finish(ToGrpc(req.status()));
        return;
      }
      Reply reply;
      absl::Status s = impl_->handler_->Handle(static_cast<RpcKind>(kind_), *req, &reply);
      if (!s.ok()) {
        Finish(ToGrpc(s));
        return;
      }
      const Variable* v = reply.var != nullptr ? reply.var : (reply.owned.IsInitialized() ? &reply.owned : nullptr);
      auto out = SerializeVar(reply.name, v);
      if (!out.ok()) {
        Finish(ToGrpc(out.status()));
        return;
      }
      response_ = *std::move(out);
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    Impl* impl_;
    int kind_;
    grpc::ByteBuffer request_, response_;
  };

  RpcHandler* handler_;
  std::string token_;
  std::unique_ptr<ThreadPool> pools_[kNumRpcKinds];
};

absl::StatusOr<std::unique_ptr<RpcServer>> RpcServer::Start(const ServerOptions& options, RpcHandler* handler) {
  OAR_RETURN_IF_ERROR(CheckEndpoint(options.endpoint));
  std::unique_ptr<RpcServer> s(new RpcServer());
  s->impl_ = std::make_unique<Impl>(handler, options);
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!options.tls_cert.empty() || !options.tls_key.empty()) {
    OAR_ASSIGN_OR_RETURN(std::string cert, ReadTlsFile("rpc_tls_cert", options.tls_cert));
    OAR_ASSIGN_OR_RETURN(std::string key, ReadTlsFile("rpc_tls_key", options.tls_key));
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({key, cert});
    creds = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(options.endpoint, creds, &s->port_);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 * 1024 * 1024);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterCallbackGenericService(s->impl_.get());
  s->impl_->server = builder.BuildAndStart();
  if (s->impl_->server == nullptr || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.endpoint,
                                               " (address in use, or not an address of this host?)"));
  }
  s->endpoint_ = absl::StrCat(options.endpoint.substr(0, options.endpoint.rfind(':')), ":", s->port_);
  LOG(INFO) << "RPC server listening on " << s->endpoint_;
  return s;
}

void RpcServer::Shutdown() {
  if (impl_ == nullptr || impl_->server == nullptr) return;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  impl_->StopPools();
  impl_->server.reset();
}

RpcServer::~RpcServer() { Shutdown(); }

}  // namespace oar::rpc
