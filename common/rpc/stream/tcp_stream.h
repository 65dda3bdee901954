// TcpStream: a ByteStream over one Boost.Asio TCP socket, with TCP_NODELAY
// and socket buffers sized for tensor blocks. Writes go straight from the
// tensor's memory to the kernel (scatter-gather, no staging copy); reads of
// large payloads go straight into their destination, small reads (frame
// headers, header protos, small tensors) come out of a 64 KiB buffer that
// one recv fills, so a small message costs one system call. Every read or
// write with a deadline is non-blocking (MSG_DONTWAIT) and waits in a poll
// bounded by it, so a stalled peer never holds a thread past it; a read with
// no deadline (a reader waiting for the next frame) sleeps in recv itself
// until data comes or Close shuts the socket down.
//
//   OAR_ASSIGN_OR_RETURN(auto s, TcpStream::Connect("10.0.0.2", 41234, deadline));
//
// Thread-safety: as ByteStream — one reader and one writer at a time, Close
// from anywhere.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "boost/asio/ip/tcp.hpp"
#include "common/rpc/stream/byte_stream.h"

namespace oar::rpc::stream {

class TcpStream final : public ByteStream {
 public:
  // Connects to host:port within `deadline`; Unavailable naming the
  // address when refused or unreachable, DeadlineExceeded when it took too
  // long.
  static absl::StatusOr<std::unique_ptr<TcpStream>> Connect(const std::string& host, int port, absl::Time deadline,
                                                            int socket_buffer_bytes = 0);
  // Takes over an accepted or connected socket's descriptor (the socket is
  // released from its io_context, which may then go).
  explicit TcpStream(boost::asio::ip::tcp::socket socket);
  ~TcpStream() override;

  absl::Status Read(void* dst, size_t n, absl::Time deadline) override;
  absl::Status Write(const std::vector<ConstPiece>& pieces, absl::Time deadline) override;
  void Close() override;
  const std::string& peer() const override { return peer_; }
  bool CanWaitReadable() const override { return true; }
  absl::Status WaitReadable(absl::Time deadline) override;
  bool Readable() override;
  // Room in the socket's send buffer: half its size (SO_SNDBUF: the
  // kernel's autotuned limit, or twice RpcOptions::socket_buffer_bytes, both
  // counting the kernel's overhead too) less the bytes queued unsent or
  // unacknowledged (SIOCOUTQ). A fresh connection's buffer is small, so
  // large writes report no room until autotuning has grown it.
  bool WritableNow(size_t n) override;

  // Sets TCP_NODELAY and, when `buffer_bytes` > 0, SO_SNDBUF/SO_RCVBUF
  // (RpcOptions::socket_buffer_bytes; else the kernel autotunes them).
  static void Tune(boost::asio::ip::tcp::socket& socket, int buffer_bytes);

 private:
  // Waits for `events` on the socket until `deadline`.
  absl::Status Wait(short events, absl::Time deadline, const char* doing);

  static constexpr size_t kBufferBytes = 64 * 1024;
  int fd_;
  std::unique_ptr<char[]> buffer_{new char[kBufferBytes]};
  size_t buffer_begin_ = 0, buffer_end_ = 0;  // unread bytes of buffer_ (reader only)
  std::string peer_;
  std::atomic<bool> closed_{false};
};

}  // namespace oar::rpc::stream
