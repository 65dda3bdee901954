// A client's lent sends (lent_sends.h): a Send that may lend its payload
// reaches a server that took the loan (ServerOptions::map_lent_sends) over
// shm as a read-only view of the client's slot for that variable, with the
// exact values; TCP, a server that declines, a client that does not offer
// and a Send that may not lend all carry the bytes; an offset outside the
// client's region fails that request only; adding into such a view sums
// into a buffer of the receiver's own and never writes the lent memory.
#include "common/rpc/stream/lent_sends.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/synchronization/mutex.h"
#include "common/rpc/grpc_transport.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_metrics.h"
#include "common/rpc/stream/frame_io.h"
#include "common/rpc/stream/received_message.h"
#include "common/rpc/transport_select.h"
#include "gtest/gtest.h"
#include "tests/common/rpc/stream/region_test_values.h"
#include "tests/common/rpc/stream/shm_pair.h"

namespace oar::rpc::stream {
namespace {

double ClientLent() { return Metrics().client_lent_bytes->With({})->Value(); }
double ServerViewed() { return Metrics().server_viewed_bytes->With({})->Value(); }

TEST(LentSendsTest, EachVariableKeepsOneSlotHoldingItsLatestValue) {
  auto lent = LentSends::Create(64 * 1024);
  ASSERT_TRUE(lent.ok()) << lent.status();
  const Tensor a = Floats(16, 16, 1.0f), b = Floats(16, 16, 9.0f);
  std::optional<Tensor> first = (*lent)->CopyIn("ps0|0|w@GRAD", a);
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(Same(*first, a));
  EXPECT_GE((*lent)->region().OffsetOf(first->raw_data(), first->nbytes()), 0);
  std::optional<Tensor> again = (*lent)->CopyIn("ps0|0|w@GRAD", b);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->raw_data(), first->raw_data()) << "the next value went elsewhere";
  EXPECT_TRUE(Same(*first, b)) << "the slot does not hold the latest value";
  // Another trainer's (or another server's) variable of the same name has
  // a slot of its own.
  std::optional<Tensor> other = (*lent)->CopyIn("ps0|1|w@GRAD", a);
  ASSERT_TRUE(other.has_value());
  EXPECT_NE(other->raw_data(), first->raw_data());
  EXPECT_TRUE(Same(*first, b));
  // A value that does not fit what is left: no slot (it goes by the ring).
  EXPECT_FALSE((*lent)->CopyIn("ps0|0|big", Floats(128, 128, 0.0f)).has_value());
  EXPECT_FALSE((*lent)->CopyIn("ps0|0|empty", Tensor()).has_value());
}

// Keeps what it is sent (as a pserver does: DecodeInto), and whether the
// value it got could be written. The handler runs on a server thread and
// the test reads on its own; only the reply's bytes on a socket order the
// two, which ThreadSanitizer cannot see, so the kept value passes under a
// mutex.
class KeepingHandler : public RpcHandler {
 public:
  bool NeverBlocks(RpcKind) const override { return true; }
  absl::Status Handle(RpcKind, const IncomingMessage& req, Reply*) override {
    Variable v;
    req.DecodeInto(&v);
    absl::MutexLock lock(&mu_);
    kept_ = v.Get<Tensor>();
    return absl::OkStatus();
  }
  Tensor Kept() {
    absl::MutexLock lock(&mu_);
    return kept_;
  }

 private:
  absl::Mutex mu_;
  Tensor kept_;
};

struct KeepingServer {
  explicit KeepingServer(bool map_lent_sends) : transport(TransportMode::kAuto, RpcOptions{}) {
    ServerOptions o;
    o.endpoint = "127.0.0.1:0";
    o.map_lent_sends = map_lent_sends;
    auto l = transport.Listen(o, &handler);
    EXPECT_TRUE(l.ok()) << l.status();
    if (l.ok()) listener = *std::move(l);
  }
  KeepingHandler handler;
  SelectingTransport transport;
  std::unique_ptr<Listener> listener;
};

// Sends `value` as "w@GRAD" through `client` and returns what the server
// kept, and the bytes the client lent meanwhile.
std::pair<Tensor, double> SendOnce(RpcClient& client, KeepingServer& server, const Tensor& value, bool lend) {
  Variable v;
  *v.GetMutable<Tensor>() = value;
  const double before = ClientLent();
  absl::Status s = client.AsyncSendVar(server.listener->endpoint(), "w@GRAD", &v, {.lend_payload = lend})->Wait();
  EXPECT_TRUE(s.ok()) << s;
  return {server.handler.Kept(), ClientLent() - before};
}

TEST(LentSendsTest, AServerThatTookTheLoanReadsTheValueWhereTheClientLentIt) {
  KeepingServer server(/*map_lent_sends=*/true);
  SelectingTransport transport(TransportMode::kShm, RpcOptions{});
  RpcClient client(&transport, {.deadline_ms = 10000, .retry_times = 0});
  const Tensor a = Floats(256, 64, 0.25f), b = Floats(256, 64, -3.0f);
  const double viewed = ServerViewed();
  auto [kept, lent] = SendOnce(client, server, a, /*lend=*/true);
  EXPECT_TRUE(Same(kept, a));
  EXPECT_FALSE(kept.Writable()) << "the server got a copy, not a view of the client's memory";
  EXPECT_EQ(lent, static_cast<double>(a.nbytes()));
  EXPECT_EQ(ServerViewed() - viewed, lent);
  // The next value of the variable lands in the same slot: what the server
  // kept of the last one shows it (hence the contract: the server is done
  // with a value before the client sends the variable again).
  auto [next, lent_next] = SendOnce(client, server, b, /*lend=*/true);
  EXPECT_TRUE(Same(next, b));
  EXPECT_EQ(next.raw_data(), kept.raw_data());
  EXPECT_TRUE(Same(kept, b));
}

TEST(LentSendsTest, WithoutAnAgreedLoanTheBytesTravel) {
  const Tensor a = Floats(64, 64, 2.0f);
  KeepingServer declines(/*map_lent_sends=*/false), takes(/*map_lent_sends=*/true);
  {
    SelectingTransport shm(TransportMode::kShm, RpcOptions{});
    RpcClient client(&shm, {.deadline_ms = 10000, .retry_times = 0});
    auto [kept, lent] = SendOnce(client, declines, a, /*lend=*/true);  // the server declines
    EXPECT_TRUE(Same(kept, a));
    EXPECT_TRUE(kept.Writable());
    EXPECT_EQ(lent, 0);
    std::tie(kept, lent) = SendOnce(client, takes, a, /*lend=*/false);  // the caller may not lend
    EXPECT_TRUE(Same(kept, a));
    EXPECT_TRUE(kept.Writable());
    EXPECT_EQ(lent, 0);
  }
  {
    SelectingTransport tcp(TransportMode::kTcp, RpcOptions{});
    RpcClient client(&tcp, {.deadline_ms = 10000, .retry_times = 0});
    auto [kept, lent] = SendOnce(client, takes, a, /*lend=*/true);
    EXPECT_TRUE(Same(kept, a));
    EXPECT_TRUE(kept.Writable());
    EXPECT_EQ(lent, 0);
  }
  {
    SelectingTransport shm(TransportMode::kShm, RpcOptions{.shm_lend_sends = false});  // the client does not offer
    RpcClient client(&shm, {.deadline_ms = 10000, .retry_times = 0});
    auto [kept, lent] = SendOnce(client, takes, a, /*lend=*/true);
    EXPECT_TRUE(Same(kept, a));
    EXPECT_TRUE(kept.Writable());
    EXPECT_EQ(lent, 0);
  }
}

TEST(LentSendsTest, AnOffsetOutsideTheClientsRegionFailsThatRequestAndTheConnectionGoesOn) {
  auto lent = LentSends::Create(16 * 1024);
  ASSERT_TRUE(lent.ok()) << lent.status();
  ShmPair pair(nullptr, &(*lent)->region(), /*map_client_region=*/true);
  ASSERT_NE(pair.server, nullptr);
  ASSERT_TRUE(pair.server_maps);
  ASSERT_NE(pair.server->lent_region(), nullptr);

  const Tensor g = Floats(8, 8, 5.0f);
  std::optional<Tensor> in_slot = (*lent)->CopyIn("k", g);
  ASSERT_TRUE(in_slot.has_value());
  auto [var, h] = MessageOf(*in_slot, "g");
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  auto pool = std::make_shared<BufferPool>();
  auto admit = [](const MessageHeader&) -> absl::StatusOr<Destination> { return Destination{.view = true}; };
  auto read_one = [&]() {
    FrameHeader f;
    EXPECT_TRUE(pair.server->Read(&f, sizeof(f), deadline).ok());
    EXPECT_TRUE(CheckFrame(f, /*expect_request=*/true, "test client").ok());
    return ReadMessage(pair.server.get(), f, admit, pool, deadline);
  };

  // A hostile request: its payload said to lie past the region's end.
  const std::string bytes = h.meta.SerializeAsString();
  FrameHeader f;
  f.type = FrameType::kRequest;
  f.has_payload = 1;
  f.flags = FrameHeader::kInRegion;
  f.call_id = 1;
  f.meta_len = static_cast<uint32_t>(bytes.size());
  f.payload_len = g.nbytes();
  const uint64_t past = (*lent)->region().size() - 16;
  ASSERT_TRUE(
      pair.client->Write({{&f, sizeof(f)}, {bytes.data(), bytes.size()}, {&past, sizeof(past)}}, deadline).ok());
  ReadResult bad = read_one();
  EXPECT_TRUE(bad.stream.ok()) << bad.stream;
  ASSERT_FALSE(bad.message.ok());
  EXPECT_EQ(bad.message.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message.status().message().find("sent 'g'"), std::string::npos) << bad.message.status();

  // Then a good one, written as a client does: a read-only view of the slot.
  ASSERT_TRUE(
      WriteMessage(pair.client.get(), FrameType::kRequest, 0, 2, 0, h, &var, deadline, false, &(*lent)->region()).ok());
  ReadResult good = read_one();
  ASSERT_TRUE(good.stream.ok()) << good.stream;
  ASSERT_TRUE(good.message.ok()) << good.message.status();
  Variable got;
  (*good.message)->DecodeInto(&got);
  EXPECT_TRUE(Same(got.Get<Tensor>(), g));
  EXPECT_FALSE(got.Get<Tensor>().Writable());
}

TEST(LentSendsTest, AServerThatDidNotMapTheRegionRefusesItsOffsets) {
  auto lent = LentSends::Create(16 * 1024);
  ASSERT_TRUE(lent.ok()) << lent.status();
  ShmPair pair(nullptr, &(*lent)->region(), /*map_client_region=*/false);
  ASSERT_NE(pair.server, nullptr);
  EXPECT_FALSE(pair.server_maps);
  EXPECT_EQ(pair.server->lent_region(), nullptr);
  std::optional<Tensor> in_slot = (*lent)->CopyIn("k", Floats(4, 4, 1.0f));
  ASSERT_TRUE(in_slot.has_value());
  auto [var, h] = MessageOf(*in_slot, "g");
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  // A client that writes an offset anyway.
  ASSERT_TRUE(
      WriteMessage(pair.client.get(), FrameType::kRequest, 0, 1, 0, h, &var, deadline, false, &(*lent)->region()).ok());
  FrameHeader f;
  ASSERT_TRUE(pair.server->Read(&f, sizeof(f), deadline).ok());
  ASSERT_TRUE(CheckFrame(f, /*expect_request=*/true, "test client").ok());
  auto admit = [](const MessageHeader&) -> absl::StatusOr<Destination> { return Destination{.view = true}; };
  ReadResult r = ReadMessage(pair.server.get(), f, admit, std::make_shared<BufferPool>(), deadline);
  EXPECT_TRUE(r.stream.ok()) << r.stream;
  ASSERT_FALSE(r.message.ok());
  EXPECT_NE(r.message.status().message().find("never lent"), std::string::npos) << r.message.status();
}

TEST(LentSendsTest, ARegionDeclinedIsTakenOffTheSocketUnmapped) {
  // What a server that declines the loan does with the fd the client put
  // on the stream's socket before its Hello (ServerHandshake).
  auto region = SharedRegion::Create(4096, "oar-test-region");
  ASSERT_TRUE(region.ok()) << region.status();
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_TRUE(SendRegion(sv[0], **region).ok());
  EXPECT_TRUE(DiscardRegion(sv[1], "the test client", absl::Now() + absl::Seconds(10)).ok());
  char c;
  EXPECT_EQ(::recv(sv[1], &c, 1, MSG_DONTWAIT), -1) << "something was left on the socket";
  EXPECT_EQ(errno, EAGAIN);
  // Nothing offered: a bounded wait, and an error naming the peer.
  absl::Status none = DiscardRegion(sv[1], "the test client", absl::Now() + absl::Milliseconds(50));
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.message().find("the test client"), std::string::npos) << none;
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(LentSendsTest, AddingIntoAReadOnlyViewSumsIntoABufferOfTheReceiversOwn) {
  // The first trainer's gradient, as a pserver keeps it: a view of memory
  // it may only read (mprotect: a write would fault).
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* mem = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto unmap = std::shared_ptr<void>(mem, [page](void* p) { ::munmap(p, page); });
  float* first = static_cast<float*>(mem);
  for (int i = 0; i < 32; ++i) first[i] = static_cast<float>(i);
  ASSERT_EQ(::mprotect(mem, page, PROT_READ), 0);
  Tensor merged = Tensor::OverReadOnlyMemory(mem, DDim{4, 8}, DataType::kFloat32, unmap);

  // The second trainer's, as a received message.
  auto [second, h] = MessageOf(Floats(4, 8, 100.0f), "w@GRAD");
  ReceivedMessage msg(h, second.Get<Tensor>());
  auto pool = std::make_shared<BufferPool>();
  ASSERT_TRUE(msg.AddPayloadInto(&merged, pool).ok());
  EXPECT_TRUE(merged.Writable());
  EXPECT_NE(merged.raw_data(), mem);
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(merged.data<float>()[i], static_cast<float>(i) + 100.0f + 0.25f * static_cast<float>(i)) << i;
    EXPECT_EQ(first[i], static_cast<float>(i));
  }
}

}  // namespace
}  // namespace oar::rpc::stream
