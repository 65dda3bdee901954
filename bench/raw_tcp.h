// The raw-socket baseline of rpc_bench: a blocking TCP server and client on
// loopback. A request is [u64 length][u8 kind]; kind 0 (push) is followed
// by `length` bytes and answered with 1 byte; kind 1 (pull) is answered with
// `length` bytes. No framing library, no copies beyond the kernel's.
//
// Thread-safety: one client per connection; the server serves connections
// on threads it owns until the process exits (bench only).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/base/listen_sockets.h"

namespace oar::bench {

inline bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

inline bool ReadAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::recv(fd, c, n, 0);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

inline void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Listens on 127.0.0.1, `port` (0: any); returns the port. Serves forever.
inline int StartRawTcpServer(int port = 0) {
  int ls = TakeListenSocket(port);  // handed to this process (common/base/listen_sockets.h), else bound here
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (ls < 0) {
    ls = ::socket(AF_INET, SOCK_STREAM, 0);
    ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(ls, 16);
  }
  socklen_t len = sizeof(a);
  getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  std::thread([ls] {
    while (true) {
      int fd = ::accept(ls, nullptr, nullptr);
      if (fd < 0) return;
      NoDelay(fd);
      std::thread([fd] {
        std::vector<char> buf;
        while (true) {
          uint64_t n;
          uint8_t kind;
          if (!ReadAll(fd, &n, 8) || !ReadAll(fd, &kind, 1)) break;
          if (buf.size() < n) buf.resize(n);
          if (kind == 0) {
            char ack = 1;
            if (!ReadAll(fd, buf.data(), n) || !WriteAll(fd, &ack, 1)) break;
          } else if (!WriteAll(fd, buf.data(), n)) {
            break;
          }
        }
        ::close(fd);
      }).detach();
    }
  }).detach();
  return ntohs(a.sin_port);
}

class RawTcpClient {
 public:
  explicit RawTcpClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    NoDelay(fd_);
  }
  ~RawTcpClient() { ::close(fd_); }
  bool ok() const { return ok_; }
  bool Push(const void* data, uint64_t n) {
    uint8_t kind = 0;
    char ack;
    return WriteAll(fd_, &n, 8) && WriteAll(fd_, &kind, 1) && WriteAll(fd_, data, n) && ReadAll(fd_, &ack, 1);
  }
  bool Pull(void* data, uint64_t n) {
    uint8_t kind = 1;
    return WriteAll(fd_, &n, 8) && WriteAll(fd_, &kind, 1) && ReadAll(fd_, data, n);
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

}  // namespace oar::bench
