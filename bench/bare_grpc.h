// The bare-gRPC baseline of rpc_bench: a generic callback service with
// "/bare/Push" (any payload, 1-byte reply) and "/bare/Pull" (the request's
// 8 bytes name a size; the reply is that many bytes as one slice that
// references a static buffer, so no copy), with the channel arguments Oar's
// RPC layer uses (uncapped messages, 16 MiB frames, BDP probe off). What
// Oar's serde and handlers add is measured against this.
//
// Thread-safety: the client is safe for concurrent calls.
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/server_posix.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/base/listen_sockets.h"
#include "common/rpc/fd_acceptor.h"

namespace oar::bench {

class BareService : public grpc::CallbackGenericService {
 public:
  explicit BareService(size_t max_pull) : data_(max_pull, 'x') {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new Call(this, ctx->method() == "/bare/Pull");
  }

 private:
  class Call : public grpc::ServerGenericBidiReactor {
   public:
    Call(BareService* s, bool pull) : s_(s), pull_(pull) { StartRead(&req_); }
    void OnReadDone(bool ok) override {
      if (!ok) return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
      size_t n = 1;
      if (pull_) {
        std::vector<grpc::Slice> sl;
        (void)req_.Dump(&sl);
        uint64_t want = 0;
        if (!sl.empty() && sl[0].size() >= 8) std::memcpy(&want, sl[0].begin(), 8);
        n = std::min<size_t>(want, s_->data_.size());
      }
      grpc::Slice slice(s_->data_.data(), n, grpc::Slice::STATIC_SLICE);
      resp_ = grpc::ByteBuffer(&slice, 1);
      StartWriteAndFinish(&resp_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    BareService* s_;
    bool pull_;
    grpc::ByteBuffer req_, resp_;
  };
  std::string data_;
};

// A bare gRPC server, and what accepts for it on a socket handed to the
// process (common/base/listen_sockets.h).
struct BareServer {
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<rpc::FdAcceptor> acceptor;
  ~BareServer() {
    if (acceptor != nullptr) acceptor->Stop();
  }
};

// Serves the socket handed to this process for *port, or listens on
// 127.0.0.1:*port (0: any free port); *port is the one bound.
inline std::unique_ptr<BareServer> StartBareServer(BareService* service, int* port) {
  auto s = std::make_unique<BareServer>();
  const int handed = TakeListenSocket(*port);
  grpc::ServerBuilder b;
  if (handed < 0) b.AddListeningPort("127.0.0.1:" + std::to_string(*port), grpc::InsecureServerCredentials(), port);
  b.SetMaxReceiveMessageSize(-1);
  b.SetMaxSendMessageSize(-1);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 * 1024 * 1024);
  b.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  b.RegisterCallbackGenericService(service);
  s->server = b.BuildAndStart();
  if (handed >= 0) {
    grpc::Server* server = s->server.get();
    s->acceptor =
        std::make_unique<rpc::FdAcceptor>(handed, [server](int conn) { grpc::AddInsecureChannelFromFd(server, conn); });
  }
  return s;
}

class BareClient {
 public:
  explicit BareClient(const std::string& ep) {
    grpc::ChannelArguments a;
    a.SetMaxReceiveMessageSize(-1);
    a.SetMaxSendMessageSize(-1);
    a.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 * 1024 * 1024);
    a.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    stub_ = std::make_unique<grpc::GenericStub>(grpc::CreateCustomChannel(ep, grpc::InsecureChannelCredentials(), a));
  }
  // Pushes `n` bytes of `data` (as a slice referencing it).
  bool Push(const void* data, size_t n) {
    grpc::Slice s(const_cast<void*>(data), n, grpc::Slice::STATIC_SLICE);
    grpc::ByteBuffer req(&s, 1), resp;
    return Call("/bare/Push", &req, &resp);
  }
  // Pulls `n` bytes into `out` (one copy out of gRPC's slices).
  bool Pull(void* out, uint64_t n) {
    grpc::Slice s(&n, 8);
    grpc::ByteBuffer req(&s, 1), resp;
    if (!Call("/bare/Pull", &req, &resp)) return false;
    std::vector<grpc::Slice> sl;
    (void)resp.Dump(&sl);
    char* o = static_cast<char*>(out);
    for (auto& x : sl) {
      std::memcpy(o, x.begin(), x.size());
      o += x.size();
    }
    return true;
  }

 private:
  bool Call(const std::string& method, grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
    grpc::ClientContext ctx;
    absl::Mutex mu;
    bool done = false;
    grpc::Status st;
    stub_->UnaryCall(&ctx, method, grpc::StubOptions(), req, resp, [&](grpc::Status s) {
      absl::MutexLock l(&mu);
      st = s;
      done = true;
    });
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(&done));
    return st.ok();
  }
  std::unique_ptr<grpc::GenericStub> stub_;
};

}  // namespace oar::bench
