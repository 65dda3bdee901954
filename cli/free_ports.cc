#include "cli/free_ports.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"

namespace oar::cli {
namespace {

// An open socket bound to 127.0.0.1:`port` (0: any), or -1; the port bound.
int BindLoopback(int port, int* bound) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *bound = ntohs(a.sin_port);
  return fd;
}

}  // namespace

absl::StatusOr<std::vector<int>> FreePorts(int n) {
  int ephemeral_low = 32768, ephemeral_high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low >> ephemeral_high;
  // Below the ephemeral range when there is room for it, else (an unusual
  // range) from the kernel, as ephemeral ports.
  const int first = 10000, last = ephemeral_low - 1;
  std::vector<int> fds, ports;
  if (last - first >= 1000) {
    const int span = last - first + 1;
    std::random_device seed;
    const int start = std::uniform_int_distribution<int>(0, span - 1)(seed);
    for (int k = 0; k < span && static_cast<int>(ports.size()) < n; ++k) {
      int port = 0;
      const int fd = BindLoopback(first + (start + k) % span, &port);
      if (fd < 0) continue;  // in use
      fds.push_back(fd);     // held until all are chosen, so none repeats
      ports.push_back(port);
    }
  }
  while (static_cast<int>(ports.size()) < n) {
    int port = 0;
    const int fd = BindLoopback(0, &port);
    if (fd < 0) break;
    fds.push_back(fd);
    ports.push_back(port);
  }
  for (int fd : fds) ::close(fd);
  if (static_cast<int>(ports.size()) < n) {
    return absl::UnavailableError(absl::StrCat("no ", n, " free ports on 127.0.0.1"));
  }
  return ports;
}

}  // namespace oar::cli
