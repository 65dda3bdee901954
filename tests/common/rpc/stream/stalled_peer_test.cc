// A stream server's deferred answers when one peer stops reading: the
// thread that answers parked requests (a pserver's loop, answering every
// trainer's Get after the optimize pass) must not wait on that peer, or one
// stalled trainer would hold up every other trainer's answer and the next
// step until its write timed out. ServerConn writes such an answer itself
// only when the stream has room, and hands it to a pool thread otherwise.
// Checked on in-memory streams whose writes block while "stalled".
#include <algorithm>
#include <chrono>
#include <deque>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/rpc/handler_pools.h"
#include "common/rpc/read_gate.h"
#include "common/rpc/stream/frame_io.h"
#include "common/rpc/stream/server_conn.h"
#include "gtest/gtest.h"

namespace oar::rpc::stream {
namespace {

// One direction of an in-memory pipe.
class Pipe {
 public:
  void Put(const void* p, size_t n) {
    absl::MutexLock l(&mu_);
    const char* c = static_cast<const char*>(p);
    bytes_.insert(bytes_.end(), c, c + n);
  }
  absl::Status Take(void* dst, size_t n, absl::Time deadline) {
    absl::MutexLock l(&mu_);
    auto ready = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return closed_ || bytes_.size() >= n; };
    if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) return absl::DeadlineExceededError("pipe read");
    if (bytes_.size() < n) return absl::CancelledError("pipe closed");
    std::copy(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(n), static_cast<char*>(dst));
    bytes_.erase(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(n));
    return absl::OkStatus();
  }
  bool Empty() {
    absl::MutexLock l(&mu_);
    return bytes_.empty();
  }
  void Close() {
    absl::MutexLock l(&mu_);
    closed_ = true;
  }

 private:
  absl::Mutex mu_;
  std::deque<char> bytes_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// One end of a connection. The server's end can be "stalled": its writes
// then wait (as a write into a full ring or socket does while the peer
// reads nothing) and it reports no room. It can also be "tight": it reports
// no room, but writes go through (a peer that reads, slowly).
class PipeStream final : public ByteStream {
 public:
  PipeStream(std::shared_ptr<Pipe> in, std::shared_ptr<Pipe> out) : in_(std::move(in)), out_(std::move(out)) {}
  absl::Status Read(void* dst, size_t n, absl::Time deadline) override { return in_->Take(dst, n, deadline); }
  absl::Status Write(const std::vector<ConstPiece>& pieces, absl::Time deadline) override {
    {
      absl::MutexLock l(&mu_);
      auto go = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !stalled_ || closed_; };
      if (!mu_.AwaitWithDeadline(absl::Condition(&go), deadline)) return absl::DeadlineExceededError("stalled");
      if (closed_) return absl::CancelledError("closed");
    }
    for (const ConstPiece& p : pieces) out_->Put(p.data, p.size);
    return absl::OkStatus();
  }
  bool WritableNow(size_t) override {
    absl::MutexLock l(&mu_);
    return !stalled_ && !tight_;
  }
  void Close() override {
    {
      absl::MutexLock l(&mu_);
      closed_ = true;
    }
    in_->Close();
    out_->Close();
  }
  const std::string& peer() const override { return peer_; }
  void Stall(bool on) {
    absl::MutexLock l(&mu_);
    stalled_ = on;
  }
  void Tight(bool on) {
    absl::MutexLock l(&mu_);
    tight_ = on;
  }

 private:
  std::shared_ptr<Pipe> in_, out_;
  std::string peer_ = "pipe";
  absl::Mutex mu_;
  bool stalled_ ABSL_GUARDED_BY(mu_) = false, tight_ ABSL_GUARDED_BY(mu_) = false, closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Parks every Get; AnswerAll answers them, oldest first, on the caller's
// thread — as the pserver's loop answers parked Gets after the pass.
class ParkingHandler final : public RpcHandler {
 public:
  absl::Status Handle(RpcKind, const IncomingMessage&, Reply*) override { return absl::OkStatus(); }
  bool Defers(RpcKind kind) const override { return kind == RpcKind::kGet; }
  bool TryHandleDeferred(RpcKind, std::shared_ptr<const IncomingMessage> request, const Respond& respond) override {
    absl::MutexLock l(&mu_);
    parked_.push_back({request->header().name(), respond});
    return true;
  }
  size_t Parked() {
    absl::MutexLock l(&mu_);
    return parked_.size();
  }
  void AnswerAll() {
    std::vector<std::pair<std::string, Respond>> parked;
    {
      absl::MutexLock l(&mu_);
      parked.swap(parked_);
    }
    for (auto& [name, respond] : parked) {
      Reply r;
      r.name = name;
      r.var.GetMutable<Tensor>()->mutable_data<float>(DDim{2})[0] = 7.0f;
      respond(absl::OkStatus(), std::move(r));
    }
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<std::string, Respond>> parked_ ABSL_GUARDED_BY(mu_);
};

struct Connection {
  std::shared_ptr<Pipe> up = std::make_shared<Pipe>(), down = std::make_shared<Pipe>();
  PipeStream client{down, up};
  PipeStream* server = new PipeStream(up, down);  // owned by the ServerConn
  std::shared_ptr<ServerConn> conn;
};

void SendGet(Connection& c, const std::string& name, uint64_t call_id) {
  sendrecv::VariableMessage meta;
  meta.set_varname(name);
  auto h = HeaderOf(std::move(meta), nullptr);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE(WriteMessage(&c.client, FrameType::kRequest, static_cast<uint8_t>(RpcKind::kGet), call_id, 0, *h, nullptr,
                           absl::Now() + absl::Seconds(10))
                  .ok());
}

// Reads one reply frame off the client's end; its call id.
absl::StatusOr<uint64_t> ReadReply(Connection& c, absl::Duration wait) {
  FrameHeader f;
  const absl::Time deadline = absl::Now() + wait;
  if (absl::Status s = c.client.Read(&f, sizeof(f), deadline); !s.ok()) return s;
  if (f.type != FrameType::kReply) return absl::InternalError("not a reply");
  std::vector<char> rest(f.meta_len + f.payload_len);
  if (absl::Status s = c.client.Read(rest.data(), rest.size(), deadline); !s.ok()) return s;
  return f.call_id;
}

// Trainer A stops reading with more answers parked than the pool has
// threads; trainer B's answer must also go through the pool (its stream
// reports no room). The answering thread returns at once, B is answered
// while A still reads nothing, and A's answers all come once it reads.
TEST(StalledPeerTest, APeerThatStoppedReadingHoldsUpNoOtherAnswer) {
  constexpr int kParkedForA = 5;
  ParkingHandler handler;
  ServerOptions options;
  options.get_threads = 2;
  HandlerPools pools(options);
  ReadGate gate(0);
  ServerContext ctx;
  ctx.handler = &handler;
  ctx.endpoint = "test";
  ctx.pools = &pools;
  ctx.gate = &gate;
  Connection a, b;
  std::thread loop;
  absl::Cleanup end = [&] {  // also when an ASSERT returns early
    a.server->Stall(false);
    if (loop.joinable()) loop.join();
    for (Connection* c : {&a, &b}) {
      if (c->conn == nullptr) continue;
      c->conn->Close();
      c->conn->Join();
    }
    pools.Stop();
  };
  for (Connection* c : {&a, &b}) {
    c->conn = std::make_shared<ServerConn>(&ctx, std::unique_ptr<ByteStream>(c->server));
    c->conn->Start();
    ASSERT_TRUE(ClientHandshake(&c->client, "", absl::Now() + absl::Seconds(10)).ok());
  }
  for (int i = 0; i < kParkedForA; ++i) SendGet(a, "w", 1 + static_cast<uint64_t>(i));  // parked first
  SendGet(b, "w", 100);
  for (int i = 0; i < 1000 && handler.Parked() < kParkedForA + 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(handler.Parked(), static_cast<size_t>(kParkedForA + 1));

  a.server->Stall(true);  // trainer A stops reading
  b.server->Tight(true);  // B reads, but its answer cannot be written at once
  absl::Notification answered;
  loop = std::thread([&] {
    handler.AnswerAll();
    answered.Notify();
  });
  // Neither the answering thread nor B's answer waits on A (a write to A
  // waits out the I/O deadline, FLAGS_rpc_deadline).
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(20))) << "the answering thread waited on A";
  absl::StatusOr<uint64_t> got_b = ReadReply(b, absl::Seconds(20));
  ASSERT_TRUE(got_b.ok()) << got_b.status() << " (B's answer waited behind A's)";
  EXPECT_EQ(*got_b, 100u);
  EXPECT_TRUE(a.down->Empty());  // nothing reached A yet
  a.server->Stall(false);        // A reads again: every answer comes
  std::vector<uint64_t> got_a;
  for (int i = 0; i < kParkedForA; ++i) {
    absl::StatusOr<uint64_t> id = ReadReply(a, absl::Seconds(20));
    ASSERT_TRUE(id.ok()) << id.status();
    got_a.push_back(*id);
  }
  std::sort(got_a.begin(), got_a.end());
  EXPECT_EQ(got_a, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  for (int i = 0; i < 1000 && ctx.in_flight.load() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(ctx.in_flight.load(), 0);  // each answer counted out once
}

}  // namespace
}  // namespace oar::rpc::stream
