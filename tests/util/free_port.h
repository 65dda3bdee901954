// A loopback port that nothing listens on at the moment of the call, for
// tests that must name endpoints before starting their servers (a
// transpiled program carries its endpoints).
//
// The port is drawn at random below the kernel's ephemeral range
// (ip_local_port_range): a port the kernel handed out for bind(0) and took
// back could be handed out again — to another test's outgoing connection as
// its local port — before this test's server binds it ("address in use").
// Below that range only another test drawing the same number can collide.
// (`oar launch` picks its ports the same way: cli/free_ports.h.) A port is
// not handed out twice by one process.
//
// Thread-safety: any thread.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <string>

namespace oar {

// Whether a listener could bind 127.0.0.1:`port` now (0: a port the kernel
// picks, returned through `port`).
inline bool CanBindLoopback(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(*port));
  socklen_t len = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (ok) *port = ntohs(a.sin_port);
  ::close(fd);
  return ok;
}

inline int FreePort() {
  int low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  constexpr int kFirst = 10000;
  if (low - kFirst >= 1000) {
    static std::mutex mu;
    static std::set<int> given;
    static std::mt19937 rng(std::random_device{}());
    std::lock_guard<std::mutex> l(mu);
    std::uniform_int_distribution<int> pick(kFirst, low - 1);
    for (int i = 0; i < 200; ++i) {
      int port = pick(rng);
      if (given.count(port) == 0 && CanBindLoopback(&port)) {
        given.insert(port);
        return port;
      }
    }
  }
  int port = 0;  // no room below the ephemeral range: the kernel's pick
  return CanBindLoopback(&port) ? port : 0;
}

inline std::string FreeEndpoint() { return "127.0.0.1:" + std::to_string(FreePort()); }

}  // namespace oar
