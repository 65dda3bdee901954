// FdMessage: a small fixed-size body plus room for one file descriptor, as
// sendmsg/recvmsg take them over a Unix socket (SCM_RIGHTS): how the shm
// transport hands over its rings (shm_stream.cc) and one end lends the
// other a region (shared_region.cc: a server its parameters, a client its
// sends).
//
//   FdMessage<Offer> m;
//   m.body.ring_bytes = ...;
//   m.Attach(fd);
//   ::sendmsg(socket, &m.msg, MSG_NOSIGNAL);
//
// Thread-safety: plain data, used by one thread.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace oar::rpc::stream {

template <typename Body>
struct FdMessage {
  Body body{};
  iovec iov{&body, sizeof(body)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  FdMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;

  // Sends `fd` along; required before sendmsg (the control block is part
  // of the message).
  void Attach(int fd) {
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  // The one descriptor that came along (after recvmsg), owned by the
  // caller from here on; -1 when there was not exactly one (every
  // descriptor a peer sent is closed then, none leaks) or some were cut.
  int Received() {
    std::vector<int> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) continue;
      const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < n; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.push_back(fd);
      }
    }
    if (fds.size() == 1 && !(msg.msg_flags & MSG_CTRUNC)) return fds[0];
    for (int fd : fds) ::close(fd);
    return -1;
  }
};

}  // namespace oar::rpc::stream
