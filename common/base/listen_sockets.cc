#include "common/base/listen_sockets.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace oar {
namespace {

struct Registry {
  absl::Mutex mu;
  std::map<int, int> fd_by_port ABSL_GUARDED_BY(mu);
  bool inherited_done ABSL_GUARDED_BY(mu) = false;
};

Registry& TheRegistry() {
  static Registry* r = new Registry();  // never destroyed: servers may ask during exit
  return *r;
}

// The port a listening TCP socket is bound to, or an error saying what `fd` is not.
absl::StatusOr<int> ListeningPort(int fd) {
  int type = 0, listening = 0;
  socklen_t len = sizeof(type);
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("descriptor ", fd, " is not a socket: ", std::strerror(errno)));
  }
  len = sizeof(listening);
  if (type != SOCK_STREAM || ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) {
    return absl::InvalidArgumentError(absl::StrCat("descriptor ", fd, " is not a listening stream socket"));
  }
  sockaddr_storage a{};
  len = sizeof(a);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("descriptor ", fd, ": getsockname: ", std::strerror(errno)));
  }
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return absl::InvalidArgumentError(absl::StrCat("descriptor ", fd, " is not a TCP socket"));
}

}  // namespace

absl::StatusOr<int> AdoptListenSocket(int fd) {
  absl::StatusOr<int> port = ListeningPort(fd);
  if (!port.ok()) {
    ::close(fd);
    return port.status();
  }
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  Registry& r = TheRegistry();
  absl::MutexLock l(&r.mu);
  auto [it, added] = r.fd_by_port.emplace(*port, fd);
  if (!added) {  // a second socket on one port (SO_REUSEPORT): keep the first
    ::close(fd);
  }
  return *port;
}

absl::Status AdoptInheritedListenSockets() {
  {
    Registry& r = TheRegistry();
    absl::MutexLock l(&r.mu);
    if (r.inherited_done) return absl::OkStatus();
    r.inherited_done = true;
  }
  const char* fds = std::getenv("LISTEN_FDS");
  const char* pid = std::getenv("LISTEN_PID");
  int n = 0, owner = 0;
  const bool mine = fds != nullptr && (pid == nullptr || (absl::SimpleAtoi(pid, &owner) && owner == ::getpid()));
  const bool counted = fds != nullptr && absl::SimpleAtoi(fds, &n) && n >= 0;
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDNAMES");
  if (!mine) return absl::OkStatus();
  if (!counted) return absl::InvalidArgumentError(absl::StrCat("LISTEN_FDS='", fds, "' is not a count of sockets"));
  absl::Status first;
  for (int fd = 3; fd < 3 + n; ++fd) {
    absl::StatusOr<int> port = AdoptListenSocket(fd);
    if (!port.ok() && first.ok()) {
      first = absl::InvalidArgumentError(absl::StrCat("LISTEN_FDS=", n, ": ", port.status().message()));
    }
  }
  return first;
}

int TakeListenSocket(int port) {
  if (port <= 0) return -1;
  Registry& r = TheRegistry();
  absl::MutexLock l(&r.mu);
  auto it = r.fd_by_port.find(port);
  if (it == r.fd_by_port.end()) return -1;
  const int fd = it->second;
  r.fd_by_port.erase(it);
  return fd;
}

absl::StatusOr<int> ListenOnLoopback(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  // As gRPC and the ring set it on their own listeners: the connections
  // accepted from this socket inherit it, and a server that binds the port
  // again after this one closed (a ring after gen_nccl_id's server) may
  // while those connections live.
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    const int e = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on 127.0.0.1:0: ", std::strerror(e)));
  }
  absl::StatusOr<int> p = ListeningPort(fd);
  if (!p.ok()) {
    ::close(fd);
    return p.status();
  }
  *port = *p;
  return fd;
}

}  // namespace oar
