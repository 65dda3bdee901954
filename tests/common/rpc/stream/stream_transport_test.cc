// Oar's stream transports through the path trainers and pservers take:
// SelectingTransport (what --rpc_transport builds) serving a handler and an
// RpcClient calling it. Values round-trip exactly (dense, LoD, SelectedRows,
// raw bytes; many calls in flight); the mode is negotiated (auto picks
// shared memory on one host; old and new ends find gRPC); a pulled value is
// read into the caller's own buffer when it fits, never into a shared one;
// errors, caps, deadlines, tokens, dead servers and replies cut half-way end
// calls with errors that name them.
#include <atomic>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/rpc/grpc_transport.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/stream/frame_io.h"
#include "common/rpc/stream/stream_client.h"
#include "common/rpc/stream/stream_server.h"
#include "common/rpc/stream/tcp_stream.h"
#include "common/rpc/transport_select.h"
#include "gtest/gtest.h"
#include "tests/util/build_paths.h"

namespace oar::rpc {
namespace {

// Stores what is sent; Get returns it; "bad" is refused; "slow" answers
// after slow_ms, or as soon as the test releases it.
class StoreHandler : public RpcHandler {
 public:
  absl::Status Handle(RpcKind kind, const IncomingMessage& req, Reply* reply) override {
    const std::string& name = req.header().name();
    if (name == "bad") return absl::InvalidArgumentError("variable 'bad' is refused");
    if (name == "slow") {
      release_slow.WaitForNotificationWithTimeout(absl::Milliseconds(slow_ms));
      slow_answered.store(true);
    }
    absl::MutexLock l(&mu_);
    if (kind == RpcKind::kSend) {
      req.DecodeInto(&vars_[name]);
      trainer_[name] = req.header().trainer_id();
      return absl::OkStatus();
    }
    auto it = vars_.find(name);
    if (it == vars_.end()) return absl::NotFoundError("no variable '" + name + "' here");
    reply->name = name;
    reply->var = it->second;
    return absl::OkStatus();
  }
  uint64_t MaxRequestBytes() const override { return max_bytes; }
  int64_t TrainerOf(const std::string& name) {
    absl::MutexLock l(&mu_);
    return trainer_[name];
  }
  uint64_t max_bytes = 0;
  int slow_ms = 800;
  absl::Notification release_slow;
  std::atomic<bool> slow_answered{false};

 private:
  absl::Mutex mu_;
  std::map<std::string, Variable> vars_;
  std::map<std::string, int64_t> trainer_;
};

RpcOptions Token(const std::string& t) {
  RpcOptions o;
  o.auth_token = t;
  return o;
}

struct Server {
  Server(TransportMode mode, const std::string& token = "", uint64_t max_bytes = 0) : transport(mode, Token(token)) {
    handler.max_bytes = max_bytes;
    ServerOptions o;
    o.endpoint = "127.0.0.1:0";
    o.auth_token = token;
    auto l = transport.Listen(o, &handler);
    EXPECT_TRUE(l.ok()) << l.status();
    if (l.ok()) listener = *std::move(l);
  }
  std::string ep() const { return listener->endpoint(); }
  StoreHandler handler;
  SelectingTransport transport;
  std::unique_ptr<Listener> listener;
};

struct Client {
  explicit Client(TransportMode mode, const std::string& token = "", int deadline_ms = 10000, int wait_spin_us = -1)
      : transport(mode, WithSpin(Token(token), wait_spin_us)),
        rpc(&transport, {.deadline_ms = deadline_ms, .retry_times = 0}) {}
  static RpcOptions WithSpin(RpcOptions o, int wait_spin_us) {
    o.wait_spin_us = wait_spin_us;
    return o;
  }
  SelectingTransport transport;
  RpcClient rpc;
};

Variable Floats(int64_t n, float base) {
  Variable v;
  float* p = v.GetMutable<Tensor>()->mutable_data<float>({n});
  for (int64_t i = 0; i < n; ++i) p[i] = base + static_cast<float>(i) * 0.5f;
  return v;
}

bool SameFloats(const Variable& a, const Variable& b) {
  const Tensor& x = a.Get<Tensor>();
  const Tensor& y = b.Get<Tensor>();
  return x.dims() == y.dims() && x.dtype() == y.dtype() && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

class StreamModeTest : public ::testing::TestWithParam<TransportMode> {};

TEST_P(StreamModeTest, ValuesRoundTripExactlyOverTheChosenPath) {
  Server server(TransportMode::kAuto);
  Client client(GetParam());
  const std::string ep = server.ep();
  // A 6 MiB block (larger than a shared-memory ring's publish step), an
  // empty one, a LoD tensor, SelectedRows and raw bytes.
  Variable big = Floats(3 << 19, 1.0f), empty = Floats(0, 0);
  Variable lod = Floats(6, 2.0f);
  lod.GetMutable<Tensor>()->set_lod({{0, 2, 6}});
  Variable rows;
  {
    SelectedRows* sr = rows.GetMutable<SelectedRows>();
    sr->height = 100;
    sr->rows = {3, 97, 3};
    sr->value.mutable_data<double>({3, 2});
    for (int i = 0; i < 6; ++i) sr->value.data<double>()[i] = i * 1.25;
  }
  ASSERT_TRUE(client.rpc.AsyncSendVar(ep, "big", &big, {.trainer_id = 3})->Wait().ok());
  ASSERT_TRUE(client.rpc.AsyncSendVar(ep, "empty", &empty)->Wait().ok());
  ASSERT_TRUE(client.rpc.AsyncSendVar(ep, "lod", &lod)->Wait().ok());
  ASSERT_TRUE(client.rpc.AsyncSendVar(ep, "rows", &rows)->Wait().ok());
  EXPECT_EQ(server.handler.TrainerOf("big"), 3);
  Variable got_big, got_empty, got_lod, got_rows;
  for (int round = 0; round < 3; ++round) {  // pulled into the same variables, as recv does
    ASSERT_TRUE(client.rpc.AsyncGetVar(ep, "big", &got_big)->Wait().ok());
    EXPECT_TRUE(SameFloats(got_big, big)) << "round " << round;
  }
  ASSERT_TRUE(client.rpc.AsyncGetVar(ep, "empty", &got_empty)->Wait().ok());
  EXPECT_EQ(got_empty.Get<Tensor>().numel(), 0);
  ASSERT_TRUE(client.rpc.AsyncGetVar(ep, "lod", &got_lod)->Wait().ok());
  EXPECT_TRUE(SameFloats(got_lod, lod));
  EXPECT_EQ(got_lod.Get<Tensor>().lod(), lod.Get<Tensor>().lod());
  ASSERT_TRUE(client.rpc.AsyncGetVar(ep, "rows", &got_rows)->Wait().ok());
  const SelectedRows& sr = got_rows.Get<SelectedRows>();
  EXPECT_EQ(sr.height, 100);
  EXPECT_EQ(sr.rows, (std::vector<int64_t>{3, 97, 3}));
  EXPECT_EQ(sr.value.data<double>()[5], 5 * 1.25);
  const std::string expected = GetParam() == TransportMode::kTcp    ? "tcp"
                               : GetParam() == TransportMode::kGrpc ? "grpc"
                                                                    : "shm";  // auto, on one host
  EXPECT_EQ(client.transport.ChosenFor(ep), expected);
}

// A pulled value whose tensor fits is read straight into that tensor's
// buffer (the stream transports) or copied into it (gRPC): either way the
// variable keeps its buffer. A buffer another tensor shares is never
// written: that tensor keeps the old values.
TEST_P(StreamModeTest, APullReusesAFittingBufferAndNeverWritesAShared) {
  Server server(TransportMode::kAuto);
  Client client(GetParam());
  const std::string ep = server.ep();
  Variable w = Floats(1 << 18, 3.0f);
  ASSERT_TRUE(client.rpc.AsyncSendVar(ep, "w", &w)->Wait().ok());
  Variable got = Floats(1 << 18, -1.0f);
  const void* buffer = got.Get<Tensor>().raw_data();
  ASSERT_TRUE(client.rpc.AsyncGetVar(ep, "w", &got)->Wait().ok());
  EXPECT_TRUE(SameFloats(got, w));
  EXPECT_EQ(got.Get<Tensor>().raw_data(), buffer);
  // Shared with another tensor (a view an op still holds).
  Tensor view = got.Get<Tensor>();
  Variable w2 = Floats(1 << 18, 7.0f);
  ASSERT_TRUE(client.rpc.AsyncSendVar(ep, "w", &w2)->Wait().ok());
  ASSERT_TRUE(client.rpc.AsyncGetVar(ep, "w", &got)->Wait().ok());
  EXPECT_TRUE(SameFloats(got, w2));
  EXPECT_EQ(view.data<float>()[5], 3.0f + 5 * 0.5f) << "the shared buffer was written";
  EXPECT_NE(got.Get<Tensor>().raw_data(), view.raw_data());
  // Another shape (or dtype) than the reply's: the variable takes the reply's.
  Variable small = Floats(10, 0.0f);
  ASSERT_TRUE(client.rpc.AsyncGetVar(ep, "w", &small)->Wait().ok());
  EXPECT_TRUE(SameFloats(small, w2));
}

TEST_P(StreamModeTest, ManyCallsInFlightFromManyThreadsGetTheirOwnReplies) {
  // Over gRPC, waiters spin first (the default on hosts of 4+ cores), then
  // sleep; over the streams, the four threads take turns reading the one
  // connection, each ending the others' calls as their replies come.
  Server server(TransportMode::kAuto);
  Client client(GetParam(), "", 10000, /*wait_spin_us=*/20);
  const std::string ep = server.ep();
  constexpr int kThreads = 4, kVars = 24;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Variable> sent, got(kVars);
      for (int i = 0; i < kVars; ++i) sent.push_back(Floats(1 + (i * 7919 + t) % 70000, t * 1000.0f + i));
      std::vector<std::shared_ptr<RpcCall>> calls;
      for (int i = 0; i < kVars; ++i)
        calls.push_back(client.rpc.AsyncSendVar(ep, absl::StrCat("v", t, "_", i), &sent[i]));
      for (auto& c : calls) wrong += !c->Wait().ok();
      calls.clear();
      for (int i = 0; i < kVars; ++i)
        calls.push_back(client.rpc.AsyncGetVar(ep, absl::StrCat("v", t, "_", i), &got[i]));
      for (auto& c : calls) wrong += !c->Wait().ok();
      for (int i = 0; i < kVars; ++i) wrong += !SameFloats(got[i], sent[i]);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_P(StreamModeTest, HandlerErrorsCapsAndDeadlinesEndTheCallNotTheConnection) {
  Server server(TransportMode::kAuto, "", /*max_bytes=*/1 << 20);
  Client client(GetParam(), "", /*deadline_ms=*/300);
  const std::string ep = server.ep();
  Variable small = Floats(16, 1), huge = Floats(1 << 19, 1);  // 2 MiB > the 1 MiB cap
  absl::Status s = client.rpc.AsyncSendVar(ep, "bad", &small)->Wait();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("'bad' is refused"), std::string::npos) << s;
  s = client.rpc.AsyncSendVar(ep, "huge", &huge)->Wait();
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  if (GetParam() != TransportMode::kGrpc) {
    EXPECT_NE(s.message().find("'huge'"), std::string::npos) << s;
  }
  // The handler holds "slow" until released: the call must end at its
  // deadline, with the handler still holding it (no bound on how late the
  // deadline fires on a loaded machine, only that it did, and not early).
  server.handler.slow_ms = 600000;
  const absl::Time start = absl::Now();
  s = client.rpc.AsyncSendVar(ep, "slow", &small)->Wait();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_FALSE(server.handler.slow_answered.load()) << "the call waited for the reply, not its deadline";
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  server.handler.release_slow.Notify();
  // The same connection goes on serving.
  EXPECT_TRUE(client.rpc.AsyncSendVar(ep, "fine", &small)->Wait().ok());
  Variable got;
  EXPECT_TRUE(client.rpc.AsyncGetVar(ep, "fine", &got)->Wait().ok());
  EXPECT_TRUE(SameFloats(got, small));
}

TEST_P(StreamModeTest, AStoppedServerFailsLaterCallsNamingIt) {
  auto server = std::make_unique<Server>(TransportMode::kAuto);
  Client client(GetParam(), "", 5000);
  const std::string ep = server->ep();
  Variable v = Floats(8, 1);
  ASSERT_TRUE(client.rpc.AsyncSendVar(ep, "x", &v)->Wait().ok());
  auto slow = client.rpc.AsyncSendVar(ep, "slow", &v);
  absl::SleepFor(absl::Milliseconds(100));
  server->listener.reset();  // stops serving, connections close
  const absl::Time start = absl::Now();
  // Shutdown lets the handler in progress answer (both servers grant it a
  // second), then the connection closes: that call ends either way, in time.
  absl::Status s = slow->Wait();
  EXPECT_LT(absl::Now() - start, absl::Seconds(4)) << s;
  s = client.rpc.AsyncSendVar(ep, "x", &v)->Wait();
  EXPECT_TRUE(absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find(ep), std::string::npos) << s;
}

INSTANTIATE_TEST_SUITE_P(Modes, StreamModeTest,
                         ::testing::Values(TransportMode::kAuto, TransportMode::kTcp, TransportMode::kShm,
                                           TransportMode::kGrpc),
                         [](const auto& info) { return std::string(TransportModeName(info.param)); });

TEST(StreamTransportTest, OldAndNewEndsSettleOnGrpc) {
  // A new client of a gRPC-only server (an older Oar, or Fluid's): gRPC.
  Server grpc_only(TransportMode::kGrpc);
  Client auto_client(TransportMode::kAuto);
  Variable v = Floats(1000, 3);
  ASSERT_TRUE(auto_client.rpc.AsyncSendVar(grpc_only.ep(), "w", &v)->Wait().ok());
  EXPECT_EQ(auto_client.transport.ChosenFor(grpc_only.ep()), "grpc");
  // A client that insists on the stream transport is told why it cannot.
  Client tcp_client(TransportMode::kTcp);
  absl::Status s = tcp_client.rpc.AsyncSendVar(grpc_only.ep(), "w", &v)->Wait();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find(grpc_only.ep()), std::string::npos) << s;
  // An old (plain gRPC) client of a new server: served over gRPC as before.
  Server both(TransportMode::kAuto);
  GrpcTransport plain;
  RpcClient old_client(&plain, {.deadline_ms = 5000, .retry_times = 0});
  ASSERT_TRUE(old_client.AsyncSendVar(both.ep(), "w", &v)->Wait().ok());
  Variable got;
  ASSERT_TRUE(auto_client.rpc.AsyncGetVar(both.ep(), "w", &got)->Wait().ok());
  EXPECT_TRUE(SameFloats(got, v));
  EXPECT_EQ(auto_client.transport.ChosenFor(both.ep()), "shm");
}

TEST(StreamTransportTest, TheTokenIsCheckedInTheStreamHandshake) {
  Server server(TransportMode::kAuto, "s3cret");
  Variable v = Floats(4, 1);
  Client good(TransportMode::kTcp, "s3cret");
  ASSERT_TRUE(good.rpc.AsyncSendVar(server.ep(), "w", &v)->Wait().ok());
  Client bad(TransportMode::kTcp, "guess");
  absl::Status s = bad.rpc.AsyncSendVar(server.ep(), "w", &v)->Wait();
  EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
  // Straight to the stream port, past gRPC: the stream server refuses too.
  StoreHandler h;
  ServerOptions o;
  o.endpoint = "127.0.0.1:0";
  o.auth_token = "s3cret";
  auto direct = stream::StreamServer::Start(o, RpcOptions{}, &h, /*shm=*/true);
  ASSERT_TRUE(direct.ok());
  for (auto kind : {stream::Route::kTcp, stream::Route::kShm}) {
    stream::StreamClient intruder(Token("guess"));
    stream::Route route{kind, kind == stream::Route::kTcp ? (*direct)->endpoint() : (*direct)->shm_name(), "test"};
    s = intruder.Connect(route, absl::Now() + absl::Seconds(5));
    EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
    stream::StreamClient friendly(Token("s3cret"));
    EXPECT_TRUE(friendly.Connect(route, absl::Now() + absl::Seconds(5)).ok());
  }
}

TEST(StreamTransportTest, WithCertificatesTheStreamIsTlsAndValuesRoundTrip) {
  const std::string cert = TestdataDir() + "/tls_test_cert.pem", key = TestdataDir() + "/tls_test_key.pem";
  StoreHandler h;
  SelectingTransport server(TransportMode::kAuto, {});
  ServerOptions o;
  o.endpoint = "127.0.0.1:0";
  o.tls_cert = cert;
  o.tls_key = key;
  auto listener = server.Listen(o, &h);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const std::string ep = (*listener)->endpoint();
  RpcOptions tls;
  tls.tls_ca = cert;
  for (TransportMode mode : {TransportMode::kAuto, TransportMode::kTcp}) {
    SelectingTransport transport(mode, tls);
    RpcClient client(&transport, {.deadline_ms = 10000, .retry_times = 0});
    Variable big = Floats(1 << 20, 0.25f), got;
    ASSERT_TRUE(client.AsyncSendVar(ep, "w", &big)->Wait().ok());
    ASSERT_TRUE(client.AsyncGetVar(ep, "w", &got)->Wait().ok());
    EXPECT_TRUE(SameFloats(got, big));
    EXPECT_EQ(transport.ChosenFor(ep), "tcp");  // TLS over TCP; no shared memory is offered with TLS
  }
  SelectingTransport shm_only(TransportMode::kShm, tls);
  RpcClient shm_client(&shm_only, {.deadline_ms = 5000, .retry_times = 0});
  Variable v = Floats(4, 1);
  absl::Status s = shm_client.AsyncSendVar(ep, "w", &v)->Wait();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  // Past gRPC, a plaintext client on the TLS stream port gets nowhere.
  auto direct = stream::StreamServer::Start(o, RpcOptions{}, &h, /*shm=*/true);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_TRUE((*direct)->tls());
  EXPECT_EQ((*direct)->shm_name(), "");
  stream::StreamClient plain(RpcOptions{});
  s = plain.Connect({stream::Route::kTcp, (*direct)->endpoint(), "test"}, absl::Now() + absl::Seconds(5));
  EXPECT_FALSE(s.ok());
  stream::StreamClient trusting(RpcOptions{.tls_ca = cert});
  EXPECT_TRUE(
      trusting.Connect({stream::Route::kTcp, (*direct)->endpoint(), "test"}, absl::Now() + absl::Seconds(5)).ok());
}

// A reply read straight into the caller's tensor (OutgoingMessage::
// reply_into) whose connection is lost half-way: the call fails UNAVAILABLE
// naming the endpoint, only after the reader let go of the tensor, which
// holds the half that arrived (it was read in place, not into a buffer).
TEST(StreamTransportTest, AReplyCutHalfWayFailsTheCallThatReadItInPlace) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const int port = acceptor.local_endpoint().port();
  constexpr int64_t kFloats = 1 << 18;
  std::thread fake([&] {
    asio::ip::tcp::socket socket(io);
    acceptor.accept(socket);
    stream::TcpStream s(std::move(socket));
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    ASSERT_TRUE(stream::ServerHandshake(&s, "", deadline).ok());
    stream::FrameHeader request;
    ASSERT_TRUE(s.Read(&request, sizeof(request), deadline).ok());
    ASSERT_TRUE(stream::Skip(&s, request.meta_len + request.payload_len, deadline).ok());
    sendrecv::VariableMessage meta;
    meta.set_varname("w");
    meta.set_type(sendrecv::LOD_TENSOR);
    meta.set_data_type(sendrecv::VariableMessage::FP32);
    meta.add_dims(kFloats);
    const std::string bytes = meta.SerializeAsString();
    stream::FrameHeader reply;
    reply.type = stream::FrameType::kReply;
    reply.call_id = request.call_id;
    reply.has_payload = 1;
    reply.meta_len = static_cast<uint32_t>(bytes.size());
    reply.payload_len = kFloats * sizeof(float);
    std::vector<float> half(kFloats / 2, 42.0f);
    ASSERT_TRUE(
        s.Write({{&reply, sizeof(reply)}, {bytes.data(), bytes.size()}, {half.data(), half.size() * sizeof(float)}},
                deadline)
            .ok());
    s.Close();
  });
  Variable got = Floats(kFloats, -1.0f);
  auto request = std::make_shared<OutgoingMessage>();
  sendrecv::VariableMessage meta;
  meta.set_varname("w");
  auto header = HeaderOf(meta, nullptr);
  ASSERT_TRUE(header.ok());
  request->header = *header;
  request->reply_into = got.GetMutable<Tensor>();
  stream::StreamClient client(RpcOptions{});
  absl::Notification done;
  absl::Status status;
  ASSERT_TRUE(client
                  .Call(RpcKind::kGet, {stream::Route::kTcp, absl::StrCat("127.0.0.1:", port), "ps0:6174"}, request,
                        absl::Now() + absl::Seconds(10),
                        [&](absl::Status s, std::unique_ptr<IncomingMessage>) {
                          status = s;
                          done.Notify();
                        })
                  .ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  fake.join();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_NE(status.message().find("ps0:6174"), std::string::npos) << status;
  const float* p = got.Get<Tensor>().data<float>();
  EXPECT_EQ(p[0], 42.0f);
  EXPECT_EQ(p[kFloats / 2 - 1], 42.0f);
  EXPECT_EQ(p[kFloats - 1], -1.0f + (kFloats - 1) * 0.5f);
  EXPECT_FALSE(got.Get<Tensor>().BufferShared());
}

TEST(StreamTransportTest, MalformedFramesAreAnsweredOrDropTheirConnectionOnly) {
  StoreHandler h;
  ServerOptions o;
  o.endpoint = "127.0.0.1:0";
  auto server = stream::StreamServer::Start(o, RpcOptions{}, &h, /*shm=*/false);
  ASSERT_TRUE(server.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  auto s = stream::TcpStream::Connect("127.0.0.1", (*server)->tcp_port(), deadline);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(stream::ClientHandshake(s->get(), "", deadline).ok());
  // A header proto that does not parse: answered INVALID_ARGUMENT, payload skipped.
  stream::FrameHeader f;
  f.kind = static_cast<uint8_t>(RpcKind::kSend);
  f.call_id = 7;
  f.meta_len = 5;
  f.has_payload = 1;
  f.payload_len = 3;
  const char junk[8] = {'\xff', '\xff', '\xff', '\xff', '\xff', 1, 2, 3};
  ASSERT_TRUE((*s)->Write({{&f, sizeof(f)}, {junk, sizeof(junk)}}, deadline).ok());
  stream::FrameHeader reply;
  ASSERT_TRUE((*s)->Read(&reply, sizeof(reply), deadline).ok());
  EXPECT_EQ(reply.type, stream::FrameType::kError);
  EXPECT_EQ(reply.call_id, 7u);
  absl::Status error;
  ASSERT_TRUE(stream::ReadError(s->get(), reply, &error, deadline).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(error)) << error;
  // A header claiming 2^62 elements: refused from its header, nothing allocated.
  sendrecv::VariableMessage meta;
  meta.set_varname("enormous");
  meta.set_type(sendrecv::LOD_TENSOR);
  meta.set_data_type(sendrecv::VariableMessage::FP32);
  meta.add_dims(int64_t{1} << 60);
  const std::string bytes = meta.SerializeAsString();
  f.call_id = 8;
  f.meta_len = static_cast<uint32_t>(bytes.size());
  f.payload_len = 0;
  ASSERT_TRUE((*s)->Write({{&f, sizeof(f)}, {bytes.data(), bytes.size()}}, deadline).ok());
  ASSERT_TRUE((*s)->Read(&reply, sizeof(reply), deadline).ok());
  ASSERT_TRUE(stream::ReadError(s->get(), reply, &error, deadline).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(error)) << error;
  EXPECT_NE(error.message().find("enormous"), std::string::npos) << error;
  // Broken framing (a wrong magic): the server drops this connection...
  f.magic = 0x12345678;
  ASSERT_TRUE((*s)->Write({{&f, sizeof(f)}}, deadline).ok());
  char c;
  absl::Status gone = (*s)->Read(&c, 1, deadline);
  EXPECT_TRUE(absl::IsUnavailable(gone)) << gone;
  // ...and keeps serving others.
  stream::StreamClient other(RpcOptions{});
  EXPECT_TRUE(other.Connect({stream::Route::kTcp, (*server)->endpoint(), "test"}, deadline).ok());
}

}  // namespace
}  // namespace oar::rpc
