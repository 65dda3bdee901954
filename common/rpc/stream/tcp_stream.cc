#include "common/rpc/stream/tcp_stream.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/io_context.hpp"

namespace oar::rpc::stream {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

int PollMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

}  // namespace

void TcpStream::Tune(tcp::socket& socket, int buffer_bytes) {
  boost::system::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  if (buffer_bytes > 0) {
    socket.set_option(asio::socket_base::send_buffer_size(buffer_bytes), ec);
    socket.set_option(asio::socket_base::receive_buffer_size(buffer_bytes), ec);
  }
}

absl::StatusOr<std::unique_ptr<TcpStream>> TcpStream::Connect(const std::string& host, int port, absl::Time deadline,
                                                              int socket_buffer_bytes) {
  const std::string where = absl::StrCat(host, ":", port);
  asio::io_context io;
  tcp::resolver resolver(io);
  boost::system::error_code ec;
  auto addresses = resolver.resolve(host, std::to_string(port), ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot resolve ", where, ": ", ec.message()));
  tcp::socket socket(io);
  bool finished = false;
  asio::async_connect(socket, addresses, [&](const boost::system::error_code& e, const tcp::endpoint&) {
    ec = e;
    finished = true;
  });
  const absl::Duration left = deadline - absl::Now();
  io.run_for(std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(left))));
  if (!finished) {
    socket.close(ec);
    return absl::DeadlineExceededError(absl::StrCat("connecting to ", where, " took too long"));
  }
  if (ec) return absl::UnavailableError(absl::StrCat("cannot connect to ", where, ": ", ec.message()));
  Tune(socket, socket_buffer_bytes);
  return std::make_unique<TcpStream>(std::move(socket));
}

TcpStream::TcpStream(tcp::socket socket) {
  boost::system::error_code ec;
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  peer_ = ec ? "tcp (unknown peer)" : absl::StrCat("tcp ", remote.address().to_string(), ":", remote.port());
  // Blocking: a reader with no deadline (waiting for the next frame) sleeps
  // in recv itself, one system call per wake-up; every call with a deadline
  // passes MSG_DONTWAIT and polls.
  socket.non_blocking(false, ec);
  fd_ = socket.release(ec);
}

TcpStream::~TcpStream() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpStream::Close() {
  if (closed_.exchange(true)) return;
  // Wakes a poll in another thread; the descriptor stays open (no reuse
  // race) until the destructor.
  ::shutdown(fd_, SHUT_RDWR);
}

absl::Status TcpStream::Wait(short events, absl::Time deadline, const char* doing) {
  pollfd p{fd_, events, 0};
  while (true) {
    if (closed_.load(std::memory_order_relaxed)) return absl::CancelledError(absl::StrCat(peer_, ": stream closed"));
    const int r = ::poll(&p, 1, PollMs(deadline));
    if (r > 0) return absl::OkStatus();
    if (r == 0) return absl::DeadlineExceededError(absl::StrCat(peer_, ": deadline passed while ", doing));
    if (errno != EINTR) return absl::UnavailableError(absl::StrCat(peer_, ": poll: ", std::strerror(errno)));
  }
}

absl::Status TcpStream::Read(void* dst, size_t n, absl::Time deadline) {
  char* p = static_cast<char*>(dst);
  const size_t buffered = std::min(n, buffer_end_ - buffer_begin_);
  if (buffered > 0) {
    std::memcpy(p, buffer_.get() + buffer_begin_, buffered);
    buffer_begin_ += buffered;
    p += buffered;
    n -= buffered;
  }
  const int flags = deadline == absl::InfiniteFuture() ? 0 : MSG_DONTWAIT;
  while (n > 0) {
    const bool direct = n >= kBufferBytes;  // a large payload: straight into its destination
    const ssize_t r = direct ? ::recv(fd_, p, n, flags) : ::recv(fd_, buffer_.get(), kBufferBytes, flags);
    if (r > 0) {
      size_t k = static_cast<size_t>(r);
      if (!direct) {
        buffer_begin_ = std::min(k, n);
        buffer_end_ = k;
        std::memcpy(p, buffer_.get(), buffer_begin_);
        k = buffer_begin_;
      }
      p += k;
      n -= k;
      continue;
    }
    if (r == 0) {
      if (closed_.load(std::memory_order_relaxed)) return absl::CancelledError(absl::StrCat(peer_, ": stream closed"));
      return absl::UnavailableError(absl::StrCat(peer_, " closed the connection"));
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat(peer_, ": receive failed: ", std::strerror(errno)));
    }
    absl::Status s = Wait(POLLIN, deadline, "receiving");
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status TcpStream::WaitReadable(absl::Time deadline) {
  if (buffer_begin_ < buffer_end_) return absl::OkStatus();
  return Wait(POLLIN, deadline, "waiting for a reply");
}

bool TcpStream::Readable() {
  if (buffer_begin_ < buffer_end_) return true;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;  // data, the peer's end, or an error the Read will name
}

bool TcpStream::WritableNow(size_t n) {
  int sndbuf = 0, queued = 0;
  socklen_t len = sizeof(sndbuf);
  if (::getsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len) != 0 || ::ioctl(fd_, SIOCOUTQ, &queued) != 0) {
    return false;
  }
  // Half: SO_SNDBUF counts the kernel's per-packet overhead as well.
  return static_cast<int64_t>(n) <= static_cast<int64_t>(sndbuf) / 2 - queued;
}

absl::Status TcpStream::Write(const std::vector<ConstPiece>& pieces, absl::Time deadline) {
  constexpr size_t kMaxIov = 64;
  iovec iov[kMaxIov];
  size_t next = 0, skip = 0;  // first unwritten piece and the bytes of it already written
  while (next < pieces.size()) {
    size_t count = 0;
    for (size_t i = next; i < pieces.size() && count < kMaxIov; ++i) {
      const size_t off = i == next ? skip : 0;
      if (pieces[i].size == off) continue;
      iov[count++] = {const_cast<char*>(static_cast<const char*>(pieces[i].data)) + off, pieces[i].size - off};
    }
    if (count == 0) break;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t w = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        if (closed_.load(std::memory_order_relaxed))
          return absl::CancelledError(absl::StrCat(peer_, ": stream closed"));
        return absl::UnavailableError(absl::StrCat(peer_, ": send failed: ", std::strerror(errno)));
      }
      absl::Status s = Wait(POLLOUT, deadline, "sending");
      if (!s.ok()) return s;
      continue;
    }
    size_t done = static_cast<size_t>(w);
    while (next < pieces.size() && done >= pieces[next].size - skip) {
      done -= pieces[next].size - skip;
      ++next;
      skip = 0;
    }
    skip += done;
  }
  return absl::OkStatus();
}

}  // namespace oar::rpc::stream
