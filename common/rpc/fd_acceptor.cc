#include "common/rpc/fd_acceptor.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "glog/logging.h"

namespace oar::rpc {

FdAcceptor::FdAcceptor(int listen_fd, std::function<void(int)> on_connection)
    : listen_fd_(listen_fd), on_connection_(std::move(on_connection)) {
  PCHECK(::pipe2(wake_, O_CLOEXEC) == 0) << "pipe for the acceptor of descriptor " << listen_fd;
  // Non-blocking, so that a connection gone between poll and accept costs
  // an EAGAIN, not a thread stuck in accept that Stop cannot wake.
  ::fcntl(listen_fd_, F_SETFL, ::fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
  thread_ = std::thread([this] { Loop(); });
}

FdAcceptor::~FdAcceptor() { Stop(); }

void FdAcceptor::Stop() {
  if (!thread_.joinable()) return;
  const char b = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_[1], &b, 1);
  thread_.join();
  ::close(wake_[0]);
  ::close(wake_[1]);
  ::close(listen_fd_);
}

void FdAcceptor::Loop() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      LOG(ERROR) << "acceptor of descriptor " << listen_fd_ << ": poll: " << std::strerror(errno);
      return;
    }
    if (p[1].revents != 0) return;
    const int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (conn < 0) {
      // The peer gave up before we took it, or a transient shortage: go on.
      if (errno != EAGAIN && errno != ECONNABORTED && errno != EINTR) {
        LOG(WARNING) << "acceptor of descriptor " << listen_fd_ << ": accept: " << std::strerror(errno);
        ::poll(nullptr, 0, 10);  // EMFILE and the like: do not spin
      }
      continue;
    }
    const int one = 1;
    ::setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    on_connection_(conn);
  }
}

}  // namespace oar::rpc
