// FdMessage (stream/fd_message.h): one descriptor travels with its body;
// a peer that sends two, or none, gets -1 and leaks nothing into this
// process.
#include "common/rpc/stream/fd_message.h"

#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

#include "gtest/gtest.h"

namespace oar::rpc::stream {
namespace {

int OpenFds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (::readdir(d) != nullptr) ++n;
  ::closedir(d);
  return n;
}

struct Pair {
  Pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0); }
  ~Pair() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  int fds[2];
};

TEST(FdMessageTest, OneDescriptorTravelsWithItsBody) {
  Pair p;
  FdMessage<uint64_t> out;
  out.body = 0x1234;
  out.Attach(p.fds[1]);
  ASSERT_EQ(::sendmsg(p.fds[0], &out.msg, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(uint64_t)));
  FdMessage<uint64_t> in;
  ASSERT_EQ(::recvmsg(p.fds[1], &in.msg, MSG_CMSG_CLOEXEC), static_cast<ssize_t>(sizeof(uint64_t)));
  EXPECT_EQ(in.body, 0x1234u);
  const int fd = in.Received();
  ASSERT_GE(fd, 0);
  EXPECT_NE(fd, p.fds[1]);  // a new descriptor of the same socket
  ::close(fd);
}

TEST(FdMessageTest, TwoDescriptorsAreRefusedAndBothClosed) {
  Pair p;
  uint32_t body = 7;
  iovec iov{&body, sizeof(body)};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  const int two[2] = {p.fds[0], p.fds[1]};
  std::memcpy(CMSG_DATA(c), two, sizeof(two));
  ASSERT_EQ(::sendmsg(p.fds[0], &msg, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(body)));

  const int before = OpenFds();
  FdMessage<uint32_t> in;
  ASSERT_EQ(::recvmsg(p.fds[1], &in.msg, MSG_CMSG_CLOEXEC), static_cast<ssize_t>(sizeof(body)));
  EXPECT_EQ(in.Received(), -1);
  EXPECT_EQ(OpenFds(), before) << "a descriptor the peer sent stayed open";
}

TEST(FdMessageTest, NoDescriptorIsMinusOne) {
  Pair p;
  uint32_t body = 9;
  ASSERT_EQ(::send(p.fds[0], &body, sizeof(body), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(body)));
  FdMessage<uint32_t> in;
  ASSERT_EQ(::recvmsg(p.fds[1], &in.msg, 0), static_cast<ssize_t>(sizeof(body)));
  EXPECT_EQ(in.Received(), -1);
}

}  // namespace
}  // namespace oar::rpc::stream
