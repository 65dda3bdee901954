// A server's lent shared memory (shared_region.h): tensors moved into it
// keep their values and their writes reach a borrower's read-only map; a
// stable reply whose value lies in it reaches a shm client as an offset
// (counted in oar_rpc_server_lent_bytes_total) and arrives exactly, while
// TCP clients, clients that decline the loan and unstable replies get the
// bytes; a peer's offset outside the region (or into one never lent) is an
// error for that message only; a borrower can neither write the lender's
// memory nor map memory that could shrink under it.
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/base/buffer_pool.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_metrics.h"
#include "common/rpc/stream/frame_io.h"
#include "common/rpc/stream/shared_region.h"
#include "common/rpc/stream/shm_stream.h"
#include "common/rpc/transport_select.h"
#include "gtest/gtest.h"
#include "tests/common/rpc/stream/region_test_values.h"
#include "tests/common/rpc/stream/shm_pair.h"

namespace oar::rpc::stream {
namespace {

double LentBytes() { return Metrics().server_lent_bytes->With({})->Value(); }

TEST(SharedRegionTest, ATensorMovedInKeepsItsValueAndItsWritesReachABorrower) {
  Tensor w = Floats(300, 7, 1.0f), b = Floats(1, 7, -2.0f);
  const Tensor w0 = Floats(300, 7, 1.0f), b0 = Floats(1, 7, -2.0f);
  w.set_lod({{0, 100, 300}});
  auto region = SharedRegion::MoveInto({&w, &b});
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_TRUE(Same(w, w0) && Same(b, b0));
  EXPECT_EQ(w.lod(), (LoD{{0, 100, 300}}));
  EXPECT_TRUE(w.OverForeignMemory());
  const int64_t at_w = (*region)->OffsetOf(w.raw_data(), w.nbytes());
  const int64_t at_b = (*region)->OffsetOf(b.raw_data(), b.nbytes());
  ASSERT_GE(at_w, 0);
  ASSERT_GE(at_b, 0);
  EXPECT_EQ(at_b % 64, 0);

  // The optimizer's in-place write: the same buffer, so the borrower sees it.
  float* p = w.mutable_data<float>();
  EXPECT_EQ((*region)->OffsetOf(p, w.nbytes()), at_w);
  p[5] = 42.0f;
  auto borrowed = SharedRegion::Map(::dup((*region)->lend_fd()), "the test");
  ASSERT_TRUE(borrowed.ok()) << borrowed.status();
  const float* seen = reinterpret_cast<const float*>((*borrowed)->At(at_w, w.nbytes()));
  ASSERT_NE(seen, nullptr);
  EXPECT_EQ(seen[5], 42.0f);
  EXPECT_EQ(seen[6], w0.data<float>()[6]);

  // A writer that needs more room leaves the region (and Gets copy again).
  w.mutable_data<float>({301, 7});
  EXPECT_FALSE(w.OverForeignMemory());
  EXPECT_EQ((*region)->OffsetOf(w.raw_data(), w.nbytes()), -1);
}

TEST(SharedRegionTest, ABorrowerCannotWriteTheLendersMemory) {
  auto region = SharedRegion::Create(8192);
  ASSERT_TRUE(region.ok()) << region.status();
  const int fd = (*region)->lend_fd();
  void* writable = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  EXPECT_EQ(writable, MAP_FAILED) << "a borrower mapped the lent memory writable";
  if (writable != MAP_FAILED) ::munmap(writable, 8192);
  auto borrowed = SharedRegion::Map(::dup(fd), "the test");
  ASSERT_TRUE(borrowed.ok()) << borrowed.status();
  void* page = const_cast<char*>((*borrowed)->At(0, 4096));
  EXPECT_NE(::mprotect(page, 4096, PROT_READ | PROT_WRITE), 0) << "a borrower made its map writable";
}

TEST(SharedRegionTest, RangesNotWhollyInsideAreRefused) {
  auto region = SharedRegion::Create(4096);
  ASSERT_TRUE(region.ok()) << region.status();
  const SharedRegion& r = **region;
  EXPECT_NE(r.At(0, 4096), nullptr);
  EXPECT_NE(r.At(4096, 0), nullptr);
  EXPECT_EQ(r.At(4096, 1), nullptr);
  EXPECT_EQ(r.At(4000, 97), nullptr);
  EXPECT_EQ(r.At(~uint64_t{0} - 2, 8), nullptr);  // overflows
  EXPECT_EQ(r.At(8, ~uint64_t{0}), nullptr);
  float outside[4];
  EXPECT_EQ(r.OffsetOf(outside, sizeof(outside)), -1);
  EXPECT_FALSE(SharedRegion::Create(0).ok());
}

TEST(SharedRegionTest, ABorrowerRefusesMemoryThatCouldShrinkUnderIt) {
  const int fd = memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 4096), 0);
  auto m = SharedRegion::Map(fd, "pserver 127.0.0.1:1");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("pserver 127.0.0.1:1"), std::string::npos) << m.status();
}

// Serves "w" from a tensor in the lent region, and "copy" (the same
// values, in private memory); `stable` says whether replies are.
class LendingHandler : public RpcHandler {
 public:
  LendingHandler() : w(Floats(512, 64, 0.5f)), copy(Floats(512, 64, 0.5f)) {
    auto r = SharedRegion::MoveInto({&w});
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) region = *std::move(r);
  }
  absl::Status Handle(RpcKind, const IncomingMessage& req, Reply* reply) override {
    reply->name = req.header().name();
    *reply->var.GetMutable<Tensor>() = reply->name == "w" ? w : copy;
    reply->stable = stable;
    return absl::OkStatus();
  }
  Tensor w, copy;
  std::shared_ptr<SharedRegion> region;
  bool stable = true;
};

struct LendingServer {
  LendingServer() : transport(TransportMode::kAuto, RpcOptions{}) {
    ServerOptions o;
    o.endpoint = "127.0.0.1:0";
    o.lend = handler.region;
    auto l = transport.Listen(o, &handler);
    EXPECT_TRUE(l.ok()) << l.status();
    if (l.ok()) listener = *std::move(l);
  }
  LendingHandler handler;
  SelectingTransport transport;
  std::unique_ptr<Listener> listener;
};

// One Get of `name` by a new client of `mode`: the value, and the bytes
// the server answered from its lent region meanwhile.
// `take_loan`: the client's RpcOptions::shm_lend_params.
std::pair<Tensor, double> GetOnce(const LendingServer& server, TransportMode mode, const std::string& name,
                                  bool take_loan = true) {
  SelectingTransport transport(mode, RpcOptions{.shm_lend_params = take_loan});
  RpcClient client(&transport, {.deadline_ms = 10000, .retry_times = 0});
  const double before = LentBytes();
  Variable got;
  absl::Status s = client.AsyncGetVar(server.listener->endpoint(), name, &got)->Wait();
  EXPECT_TRUE(s.ok()) << s;
  return {got.IsType<Tensor>() ? got.Get<Tensor>() : Tensor(), LentBytes() - before};
}

TEST(LentRegionTest, AStableReplyReachesAShmClientAsAnOffsetInTheLentRegion) {
  LendingServer server;
  const double bytes = static_cast<double>(server.handler.w.nbytes());
  auto [shm, lent] = GetOnce(server, TransportMode::kShm, "w");
  EXPECT_TRUE(Same(shm, server.handler.copy));
  EXPECT_EQ(lent, bytes);

  // The next value is read where it lies (no copy was kept anywhere).
  // Written in place: mutable_data would move a buffer the server's last
  // reply may still share (its release races this line) out of the region.
  const_cast<float*>(server.handler.w.data<float>())[3] = -7.0f;
  const_cast<float*>(server.handler.copy.data<float>())[3] = -7.0f;
  std::tie(shm, lent) = GetOnce(server, TransportMode::kShm, "w");
  EXPECT_TRUE(Same(shm, server.handler.copy));
  EXPECT_EQ(lent, bytes);

  // A value outside the region, or over TCP: the bytes themselves.
  std::tie(shm, lent) = GetOnce(server, TransportMode::kShm, "copy");
  EXPECT_TRUE(Same(shm, server.handler.copy));
  EXPECT_EQ(lent, 0);
  auto [tcp, over_tcp] = GetOnce(server, TransportMode::kTcp, "w");
  EXPECT_TRUE(Same(tcp, server.handler.copy));
  EXPECT_EQ(over_tcp, 0);
}

TEST(LentRegionTest, UnstableRepliesAndClientsThatDeclineGetTheBytes) {
  LendingServer server;
  {
    auto [got, lent] = GetOnce(server, TransportMode::kShm, "w", /*take_loan=*/false);
    EXPECT_TRUE(Same(got, server.handler.copy));
    EXPECT_EQ(lent, 0);
  }
  server.handler.stable = false;
  auto [got, lent] = GetOnce(server, TransportMode::kShm, "w");
  EXPECT_TRUE(Same(got, server.handler.copy));
  EXPECT_EQ(lent, 0);
}

TEST(LentRegionTest, AnOffsetOutsideTheRegionFailsThatReplyAndTheConnectionGoesOn) {
  Tensor w = Floats(64, 16, 3.0f);
  const Tensor w0 = Floats(64, 16, 3.0f);
  auto region = SharedRegion::MoveInto({&w});
  ASSERT_TRUE(region.ok()) << region.status();
  ShmPair pair(region->get());
  ASSERT_NE(pair.client, nullptr);
  ASSERT_TRUE(pair.lent);
  ASSERT_NE(pair.client->lent_region(), nullptr);
  EXPECT_EQ(pair.client->lent_region()->size(), (*region)->size());

  auto [var, h] = MessageOf(w, "w");
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  auto pool = std::make_shared<BufferPool>();
  auto admit = [](const MessageHeader&) -> absl::StatusOr<Destination> { return Destination{}; };
  auto read_one = [&]() {
    FrameHeader f;
    EXPECT_TRUE(pair.client->Read(&f, sizeof(f), deadline).ok());
    EXPECT_TRUE(CheckFrame(f, /*expect_request=*/false, "test server").ok());
    return ReadMessage(pair.client.get(), f, admit, pool, deadline);
  };

  // A hostile frame: the payload said to lie past the region's end.
  const std::string bytes = h.meta.SerializeAsString();
  FrameHeader f;
  f.type = FrameType::kReply;
  f.has_payload = 1;
  f.flags = FrameHeader::kInRegion;
  f.call_id = 1;
  f.meta_len = static_cast<uint32_t>(bytes.size());
  f.payload_len = w.nbytes();
  const uint64_t past = (*region)->size() - 64;
  ASSERT_TRUE(
      pair.server->Write({{&f, sizeof(f)}, {bytes.data(), bytes.size()}, {&past, sizeof(past)}}, deadline).ok());
  ReadResult bad = read_one();
  EXPECT_TRUE(bad.stream.ok()) << bad.stream;
  ASSERT_FALSE(bad.message.ok());
  EXPECT_EQ(bad.message.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message.status().message().find("offset"), std::string::npos) << bad.message.status();

  // The same connection then carries a good one, written as a server does.
  ASSERT_TRUE(
      WriteMessage(pair.server.get(), FrameType::kReply, 0, 2, 0, h, &var, deadline, false, region->get()).ok());
  ReadResult good = read_one();
  ASSERT_TRUE(good.stream.ok()) << good.stream;
  ASSERT_TRUE(good.message.ok()) << good.message.status();
  Variable got;
  (*good.message)->DecodeInto(&got);
  EXPECT_TRUE(Same(got.Get<Tensor>(), w0));
}

TEST(LentRegionTest, AnOffsetIntoARegionNeverLentFailsThatReply) {
  Tensor w = Floats(8, 8, 1.0f);
  auto region = SharedRegion::MoveInto({&w});
  ASSERT_TRUE(region.ok()) << region.status();
  ShmPair pair(region->get(), nullptr, false, /*client_maps_server=*/false);  // the client declines
  ASSERT_NE(pair.client, nullptr);
  EXPECT_FALSE(pair.lent);
  EXPECT_EQ(pair.client->lent_region(), nullptr);
  auto [var, h] = MessageOf(w, "w");
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  // A server that writes an offset anyway.
  ASSERT_TRUE(
      WriteMessage(pair.server.get(), FrameType::kReply, 0, 1, 0, h, &var, deadline, false, region->get()).ok());
  FrameHeader f;
  ASSERT_TRUE(pair.client->Read(&f, sizeof(f), deadline).ok());
  ASSERT_TRUE(CheckFrame(f, /*expect_request=*/false, "test server").ok());
  auto admit = [](const MessageHeader&) -> absl::StatusOr<Destination> { return Destination{}; };
  ReadResult r = ReadMessage(pair.client.get(), f, admit, std::make_shared<BufferPool>(), deadline);
  EXPECT_TRUE(r.stream.ok()) << r.stream;
  ASSERT_FALSE(r.message.ok());
  EXPECT_NE(r.message.status().message().find("never lent"), std::string::npos) << r.message.status();
}

TEST(LentRegionTest, OnlyAMessageWithAPayloadMayPlaceItInARegion) {
  // A request (in the client's region) or a reply (in the server's) may say
  // its payload lies in a region; nothing else may, nor use flags this
  // version does not know.
  FrameHeader f;
  f.type = FrameType::kRequest;
  f.has_payload = 1;
  f.flags = FrameHeader::kInRegion;
  EXPECT_TRUE(CheckFrame(f, /*expect_request=*/true, "a client").ok());
  f.has_payload = 0;
  EXPECT_FALSE(CheckFrame(f, /*expect_request=*/true, "a client").ok());
  f.type = FrameType::kReply;
  f.has_payload = 1;
  f.flags = 2;  // unknown
  EXPECT_FALSE(CheckFrame(f, /*expect_request=*/false, "a server").ok());
  f.flags = FrameHeader::kInRegion;
  EXPECT_TRUE(CheckFrame(f, /*expect_request=*/false, "a server").ok());
  f.type = FrameType::kError;
  f.kind = static_cast<uint8_t>(absl::StatusCode::kInternal);
  EXPECT_FALSE(CheckFrame(f, /*expect_request=*/false, "a server").ok());
}

}  // namespace
}  // namespace oar::rpc::stream
