// TcpStream::WritableNow on loopback: while the peer reads nothing, writes
// of what it says fits never wait, and it says "no room" before the
// socket's buffers are full; once the peer has read, there is room again.
#include <vector>

#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "common/rpc/stream/tcp_stream.h"
#include "gtest/gtest.h"

namespace oar::rpc::stream {
namespace {

TEST(TcpWritableTest, SaysNoRoomBeforeAWriteWouldWaitAndRoomOnceThePeerReads) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  auto client = TcpStream::Connect("127.0.0.1", acceptor.local_endpoint().port(), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(client.ok()) << client.status();
  TcpStream server(acceptor.accept());

  constexpr size_t kChunk = 16 << 10;
  const std::vector<char> chunk(kChunk, 'x');
  EXPECT_TRUE(server.WritableNow(1));
  EXPECT_FALSE(server.WritableNow(size_t{1} << 30));
  size_t written = 0;
  int writes = 0;
  for (; writes < 4096 && server.WritableNow(kChunk); ++writes) {
    // Never waits: a write that did would end at this deadline.
    ASSERT_TRUE(server.Write({{chunk.data(), chunk.size()}}, absl::Now() + absl::Seconds(5)).ok());
    written += kChunk;
  }
  EXPECT_LT(writes, 4096) << "it never said the peer's unread bytes left no room";
  EXPECT_GT(written, 0u);

  std::vector<char> sink(kChunk);
  for (size_t read = 0; read < written; read += kChunk) {
    ASSERT_TRUE((*client)->Read(sink.data(), kChunk, absl::Now() + absl::Seconds(10)).ok());
  }
  bool room = false;  // the peer's acknowledgements arrive at once on loopback
  for (int i = 0; i < 500 && !room; ++i) {
    room = server.WritableNow(kChunk);
    if (!room) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(room);
}

}  // namespace
}  // namespace oar::rpc::stream
