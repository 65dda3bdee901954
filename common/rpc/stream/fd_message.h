// FdMessage: a small fixed-size body plus room for one file descriptor, as
// sendmsg/recvmsg take them over a Unix socket (SCM_RIGHTS): how the shm
// transport hands over its rings (shm_stream.cc) and a server lends its
// region (shared_region.cc).
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

#include <cstring>

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

  // Sends `fd` along (before sendmsg).
  void Attach(int fd) {
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  // The descriptor that came along (after recvmsg), or -1.
  int Received() {
    int fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
        std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
      }
    }
    return fd;
  }
};

}  // namespace oar::rpc::stream
