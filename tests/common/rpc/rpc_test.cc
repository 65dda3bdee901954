// The RPC client over the gRPC transport on loopback, with a small
// in-memory handler: large payloads, handler errors, malformed requests and
// replies, auth tokens, TLS, message caps, bounded queues, dead endpoints
// and bounded waits.
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/rpc/grpc_server.h"
#include "common/rpc/grpc_transport.h"
#include "common/rpc/rpc_client.h"
#include "gtest/gtest.h"
#include "tests/util/build_paths.h"

namespace oar::rpc {
namespace {

// Stores sent variables by name; Get returns them; "bad" is refused.
class MapHandler : public RpcHandler {
 public:
  absl::Status Handle(RpcKind kind, const IncomingMessage& req, Reply* reply) override {
    if (block_) {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(&release_));
    }
    absl::MutexLock l(&mu_);
    const std::string& name = req.header().name();
    if (name == "bad") return absl::InvalidArgumentError("variable 'bad' is refused");
    if (kind == RpcKind::kSend) {
      req.DecodeInto(&vars_[name]);
      last_trainer_ = req.header().trainer_id();
      return absl::OkStatus();
    }
    auto it = vars_.find(name);
    if (it == vars_.end()) return absl::NotFoundError("no variable '" + name + "' here");
    reply->name = name;
    reply->var = it->second;
    return absl::OkStatus();
  }
  uint64_t MaxRequestBytes() const override { return max_bytes_; }
  void set_max_bytes(uint64_t n) { max_bytes_ = n; }
  // Handlers wait until Release().
  void Block() { block_ = true; }
  void Release() {
    absl::MutexLock l(&mu_);
    release_ = true;
  }
  int64_t last_trainer() {
    absl::MutexLock l(&mu_);
    return last_trainer_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, Variable> vars_;
  int64_t last_trainer_ = -1;
  uint64_t max_bytes_ = 0;
  std::atomic<bool> block_{false};
  bool release_ = false;
};

std::unique_ptr<GrpcServer> Serve(MapHandler* h, const std::string& token = "", int max_queued = 0) {
  ServerOptions o;
  o.endpoint = "127.0.0.1:0";
  o.send_threads = o.get_threads = max_queued > 0 ? 1 : 2;
  o.auth_token = token;
  o.max_queued_requests = max_queued;
  auto s = GrpcServer::Start(o, h);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// A client over its own gRPC transport.
struct Client {
  explicit Client(ClientOptions o, RpcOptions t = {}) : transport(t), rpc(&transport, o) {}
  RpcClient* operator->() { return &rpc; }
  GrpcTransport transport;
  RpcClient rpc;
};

TEST(RpcTest, SendsAndGetsATensorLargerThanGrpcsDefaultCap) {
  MapHandler h;
  auto server = Serve(&h);
  ASSERT_NE(server, nullptr);
  Client client(ClientOptions{.deadline_ms = 10000, .retry_times = 0});
  Variable v;
  Tensor* t = v.GetMutable<Tensor>();
  float* p = t->mutable_data<float>({5 * 1024 * 1024 / 4 + 3});  // > 4 MiB
  for (int64_t i = 0; i < t->numel(); ++i) p[i] = static_cast<float>(i % 1000);
  ASSERT_TRUE(client->AsyncSendVar(server->endpoint(), "w", &v, {.trainer_id = 3})->Wait().ok());
  EXPECT_EQ(h.last_trainer(), 3);
  Variable got;
  auto s = client->AsyncGetVar(server->endpoint(), "w", &got)->Wait();
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(got.Get<Tensor>().numel(), t->numel());
  EXPECT_EQ(got.Get<Tensor>().data<float>()[t->numel() - 1], p[t->numel() - 1]);
}

TEST(RpcTest, HandlerErrorsComeBackNamingRpcVariableAndEndpoint) {
  MapHandler h;
  auto server = Serve(&h);
  ASSERT_NE(server, nullptr);
  Client client(ClientOptions{.deadline_ms = 5000, .retry_times = 2});
  Variable v;
  v.GetMutable<Tensor>()->mutable_data<float>({2});
  absl::Status s = client->AsyncSendVar(server->endpoint(), "bad", &v)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("SendVariable 'bad' to " + server->endpoint()), std::string::npos) << s;
  EXPECT_NE(s.message().find("is refused"), std::string::npos) << s;
  Variable out;
  s = client->AsyncGetVar(server->endpoint(), "nope", &out)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
}

TEST(RpcTest, MalformedRequestIsInvalidArgumentAndTheServerKeepsServing) {
  MapHandler h;
  auto server = Serve(&h);
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(server->endpoint(), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice junk(std::string("\x42\xff\xff\xff\x0f", 5));  // field 8 claiming 4 GiB
  grpc::ByteBuffer req(&junk, 1), resp;
  absl::Mutex mu;
  bool done = false;
  grpc::Status st;
  stub.UnaryCall(&ctx, MethodPath(RpcKind::kSend), grpc::StubOptions(), &req, &resp, [&](grpc::Status s) {
    absl::MutexLock l(&mu);
    st = s;
    done = true;
  });
  {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(&done));
  }
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("malformed VariableMessage"), std::string::npos) << st.error_message();
  Client client(ClientOptions{.deadline_ms = 5000, .retry_times = 0});
  Variable v;
  v.GetMutable<Tensor>()->mutable_data<float>({2});
  EXPECT_TRUE(client->AsyncSendVar(server->endpoint(), "w", &v)->Wait().ok());
}

TEST(RpcTest, AuthTokenIsRequiredWhenTheServerHasOne) {
  MapHandler h;
  auto server = Serve(&h, "s3cret");
  ASSERT_NE(server, nullptr);
  Variable v;
  v.GetMutable<Tensor>()->mutable_data<float>({2});
  Client anonymous(ClientOptions{.deadline_ms = 5000, .retry_times = 0});
  absl::Status s = anonymous->AsyncSendVar(server->endpoint(), "w", &v)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  Client wrong(ClientOptions{.deadline_ms = 5000, .retry_times = 0}, {.auth_token = "guess"});
  EXPECT_EQ(wrong->AsyncSendVar(server->endpoint(), "w", &v)->Wait().code(), absl::StatusCode::kUnauthenticated);
  Client right(ClientOptions{.deadline_ms = 5000, .retry_times = 0}, {.auth_token = "s3cret"});
  EXPECT_TRUE(right->AsyncSendVar(server->endpoint(), "w", &v)->Wait().ok());
}

TEST(RpcTest, DeadPserverFailsWithinTheDeadlineNamingEndpointAndVariable) {
  // A port nobody listens on: bind a server, note its port, shut it down.
  MapHandler h;
  auto server = Serve(&h);
  ASSERT_NE(server, nullptr);
  const std::string ep = server->endpoint();
  server.reset();
  Client client(ClientOptions{.deadline_ms = 300, .retry_times = 2});
  Variable v;
  v.GetMutable<Tensor>()->mutable_data<float>({2});
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = client->AsyncSendVar(ep, "fc_w@GRAD", &v)->Wait();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'fc_w@GRAD' to " + ep), std::string::npos) << s;
  EXPECT_NE(s.message().find(" attempts"), std::string::npos) << s;  // it was retried
  EXPECT_LT(secs, 30.0);  // bounded by the 300 ms deadline, retries included; a generous bound, not a timing assertion
  absl::Status ready = client->WaitServerReady({ep}, 300);
  EXPECT_EQ(ready.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(ready.message().find(ep), std::string::npos) << ready;
  EXPECT_EQ(client->WaitServerReady({"no-port"}, 10).code(), absl::StatusCode::kInvalidArgument);
  // A server that is up, listed after the dead one, is not named with it
  // (the dead one took the whole deadline; the live one was still checked).
  MapHandler h2;
  auto live = Serve(&h2);
  ASSERT_NE(live, nullptr);
  ready = client->WaitServerReady({ep, live->endpoint()}, 300);
  EXPECT_EQ(ready.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(ready.message().find(ep), std::string::npos) << ready;
  EXPECT_EQ(ready.message().find(live->endpoint()), std::string::npos) << ready;
  // A wait that may learn meanwhile that the server will not come (an
  // elastic job that ended): asked between tries, it ends the wait long
  // before the deadline; until it says so the wait goes on.
  int asked = 0;
  ready = client->WaitServerReady({ep}, 600000, [&] { return ++asked == 3; });
  EXPECT_EQ(ready.code(), absl::StatusCode::kCancelled) << ready;
  EXPECT_NE(ready.message().find(ep), std::string::npos) << ready;
  EXPECT_EQ(asked, 3);
  asked = 0;
  EXPECT_TRUE(client->WaitServerReady({live->endpoint()}, 600000, [&] { return ++asked > 0; }).ok());
  EXPECT_EQ(asked, 0);  // not asked: it answered
}

TEST(RpcTest, TlsWhenCertificatesAreGiven) {
  MapHandler h;
  ServerOptions o;
  o.endpoint = "127.0.0.1:0";
  o.tls_cert = TestdataDir() + "/tls_test_cert.pem";
  o.tls_key = TestdataDir() + "/tls_test_key.pem";
  auto server = GrpcServer::Start(o, &h);
  ASSERT_TRUE(server.ok()) << server.status();
  Variable v;
  v.GetMutable<Tensor>()->mutable_data<float>({2});
  Client tls(ClientOptions{.deadline_ms = 5000, .retry_times = 0}, {.tls_ca = TestdataDir() + "/tls_test_cert.pem"});
  absl::Status s = tls->AsyncSendVar((*server)->endpoint(), "w", &v)->Wait();
  EXPECT_TRUE(s.ok()) << s;
  Client plain(ClientOptions{.deadline_ms = 1000, .retry_times = 0});
  EXPECT_FALSE(plain->AsyncSendVar((*server)->endpoint(), "w", &v)->Wait().ok());  // plaintext is refused
  o.tls_key = "/nonexistent.pem";
  EXPECT_NE(GrpcServer::Start(o, &h).status().message().find("--rpc_tls_key: cannot read '/nonexistent.pem'"),
            std::string::npos);
}

// A port another server holds: the error says so (gRPC says only that it
// could not listen), and names the endpoint.
TEST(RpcTest, AServerOnAPortInUseSaysWhy) {
  MapHandler h;
  ServerOptions o;
  o.endpoint = "127.0.0.1:0";
  auto first = GrpcServer::Start(o, &h);
  ASSERT_TRUE(first.ok()) << first.status();
  o.endpoint = (*first)->endpoint();
  auto second = GrpcServer::Start(o, &h);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(),
            "cannot listen on " + o.endpoint + ": Address already in use (something else listens there)");
}

// Regression: an unreadable --rpc_tls_ca silently fell back to the system's
// root certificates; now every call fails naming the flag and the file.
TEST(RpcTest, UnreadableTlsCaIsAnErrorNotAFallback) {
  MapHandler h;
  auto server = Serve(&h);
  ASSERT_NE(server, nullptr);
  Variable v;
  v.GetMutable<Tensor>()->mutable_data<float>({2});
  Client c(ClientOptions{.deadline_ms = 2000, .retry_times = 0}, {.tls_ca = "/nonexistent/ca.pem"});
  absl::Status s = c->AsyncSendVar(server->endpoint(), "w", &v)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("--rpc_tls_ca: cannot read '/nonexistent/ca.pem'"), std::string::npos) << s;
}

// A request larger than the server's cap is refused by gRPC before the
// handler (or an allocation) sees it.
TEST(RpcTest, RequestsLargerThanTheServersCapAreRefusedUnread) {
  MapHandler h;
  h.set_max_bytes(64 * 1024);
  auto server = Serve(&h);
  ASSERT_NE(server, nullptr);
  Client c(ClientOptions{.deadline_ms = 5000, .retry_times = 0});
  Variable small, big;
  small.GetMutable<Tensor>()->mutable_data<float>({1000});
  big.GetMutable<Tensor>()->mutable_data<float>({100000});
  EXPECT_TRUE(c->AsyncSendVar(server->endpoint(), "w", &small)->Wait().ok());
  absl::Status s = c->AsyncSendVar(server->endpoint(), "w", &big)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
}

// Regression: handler pools queued without limit, so a flood of sends held
// every request's payload in memory. Now a full queue answers
// RESOURCE_EXHAUSTED naming the limit, and the server goes on serving.
TEST(RpcTest, AFullHandlerQueueAnswersResourceExhausted) {
  MapHandler h;
  h.Block();
  auto server = Serve(&h, "", /*max_queued=*/2);
  ASSERT_NE(server, nullptr);
  Client c(ClientOptions{.deadline_ms = 10000, .retry_times = 0});
  Variable v;
  v.GetMutable<Tensor>()->mutable_data<float>({1024});
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (int i = 0; i < 8; ++i) calls.push_back(c->AsyncSendVar(server->endpoint(), "w", &v));
  // Up to two wait in the queue (and one may already run), the rest are
  // refused at once.
  std::thread release([&h] {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    h.Release();
  });
  int refused = 0, ok = 0;
  for (auto& call : calls) {
    absl::Status s = call->Wait();
    if (s.code() == absl::StatusCode::kResourceExhausted) {
      ++refused;
      EXPECT_NE(s.message().find("FLAGS_rpc_max_queued_requests"), std::string::npos) << s;
    } else {
      EXPECT_TRUE(s.ok()) << s;
      ++ok;
    }
  }
  release.join();
  EXPECT_GE(refused, 1);
  EXPECT_GE(ok, 2);
  EXPECT_TRUE(c->AsyncSendVar(server->endpoint(), "w", &v)->Wait().ok());
}

TEST(RpcTest, ServerBindsOnlyToTheEndpointsHost) {
  MapHandler h;
  ServerOptions o;
  o.endpoint = "10.255.255.1:0";  // not an address of this host
  auto s = GrpcServer::Start(o, &h);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("10.255.255.1:0"), std::string::npos) << s.status();
}

// A server that answers every call with the same raw bytes.
class JunkService : public grpc::CallbackGenericService {
 public:
  explicit JunkService(std::string reply) : reply_(std::move(reply)) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      explicit Reactor(const std::string& reply) : slice_(reply), response_(&slice_, 1) { StartRead(&request_); }
      void OnReadDone(bool) override { StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK); }
      void OnDone() override { delete this; }

     private:
      grpc::Slice slice_;
      grpc::ByteBuffer request_, response_;
    };
    return new Reactor(reply_);
  }

 private:
  std::string reply_;
};

// Regression: the client moved the receiving variable's buffer out before
// it parsed the reply, so a malformed reply emptied a parameter. Now the
// reply is parsed and checked first, and the variable keeps its value.
TEST(RpcTest, AMalformedReplyLeavesTheTargetVariableAsItWas) {
  sendrecv::VariableMessage lie;  // sizes that add up, a LoD that does not
  lie.set_varname("w");
  lie.set_data_type(sendrecv::VariableMessage::FP32);
  lie.add_dims(4);
  lie.set_serialized(std::string(16, '\0'));
  auto* lod = lie.add_lod();
  for (int64_t v : {0, 3, 1}) lod->add_lod_data(v);
  JunkService junk(lie.SerializeAsString());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterCallbackGenericService(&junk);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  Client c(ClientOptions{.deadline_ms = 5000, .retry_times = 0});
  Variable w;
  *w.GetMutable<Tensor>() = MakeTensor<float>({4}, {1, 2, 3, 4});
  const void* before = w.Get<Tensor>().raw_data();
  absl::Status s = c->AsyncGetVar("127.0.0.1:" + std::to_string(port), "w", &w)->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("the reply"), std::string::npos) << s;
  EXPECT_NE(s.message().find("LoD offsets decrease"), std::string::npos) << s;
  ASSERT_TRUE(w.IsType<Tensor>());
  EXPECT_EQ(w.Get<Tensor>().raw_data(), before);
  EXPECT_EQ(TensorToVector<float>(w.Get<Tensor>()), (std::vector<float>{1, 2, 3, 4}));
  server->Shutdown();
}

}  // namespace
}  // namespace oar::rpc
