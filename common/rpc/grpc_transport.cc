#include "common/rpc/grpc_transport.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/rpc/grpc_server.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/var_serde.h"

namespace oar::rpc {
namespace {

// One attempt; deletes itself after `done` ran.
struct GrpcCall {
  grpc::ClientContext ctx;
  grpc::ByteBuffer request, response;
  CallDone done;
  void Finish(const grpc::Status& s) {
    absl::Status status = FromGrpc(s);
    std::unique_ptr<IncomingMessage> reply;
    if (status.ok()) {
      auto parsed = ParseMessage(response);
      if (parsed.ok()) {
        reply = *std::move(parsed);
      } else {
        status = Annotate(parsed.status(), "the reply");
      }
    }
    response.Clear();
    CallDone d = std::move(done);
    delete this;
    d(std::move(status), std::move(reply));
  }
};

std::chrono::system_clock::time_point ToChrono(absl::Time t) { return absl::ToChronoTime(t); }

}  // namespace

GrpcTransport::GrpcTransport(RpcOptions options) : Transport(std::move(options)) {}
GrpcTransport::~GrpcTransport() = default;

absl::StatusOr<std::shared_ptr<grpc::Channel>> GrpcTransport::Channel(const std::string& ep) {
  OAR_RETURN_IF_ERROR(CheckEndpoint(ep));
  absl::MutexLock l(&mu_);
  auto& ch = channels_[ep];
  if (ch == nullptr) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 * 1024 * 1024);
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (!options().tls_ca.empty()) {
      auto ca = ReadTlsFile("rpc_tls_ca", options().tls_ca);
      if (!ca.ok()) {
        channels_.erase(ep);
        return Annotate(ca.status(), absl::StrCat("TLS to ", ep));
      }
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = *ca;
      creds = grpc::SslCredentials(ssl);
    }
    ch = grpc::CreateCustomChannel(ep, creds, args);
  }
  return ch;
}

void GrpcTransport::Call(RpcKind kind, const std::string& ep, std::shared_ptr<const OutgoingMessage> request,
                         absl::Time deadline, CallDone done) {
  auto channel = Channel(ep);
  if (!channel.ok()) {
    done(channel.status(), nullptr);
    return;
  }
  auto bytes = SerializeMessage(request->header, &request->var);
  if (!bytes.ok()) {
    done(bytes.status(), nullptr);
    return;
  }
  auto* call = new GrpcCall;
  call->request = *std::move(bytes);
  call->done = std::move(done);
  call->ctx.set_deadline(ToChrono(deadline));
  if (!options().auth_token.empty()) call->ctx.AddMetadata(kAuthMetadataKey, options().auth_token);
  grpc::GenericStub stub(*channel);
  stub.UnaryCall(&call->ctx, MethodPath(kind), grpc::StubOptions(), &call->request, &call->response,
                 [call](grpc::Status s) { call->Finish(s); });
}

absl::Status GrpcTransport::WaitReady(const std::string& ep, absl::Time deadline) {
  OAR_ASSIGN_OR_RETURN(auto channel, Channel(ep));
  if (channel->WaitForConnected(ToChrono(deadline))) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(ep, " accepted no connection"));
}

absl::StatusOr<std::unique_ptr<Listener>> GrpcTransport::Listen(const ServerOptions& options, RpcHandler* handler) {
  OAR_ASSIGN_OR_RETURN(std::unique_ptr<GrpcServer> server, GrpcServer::Start(options, handler));
  return std::unique_ptr<Listener>(std::move(server));
}

}  // namespace oar::rpc
