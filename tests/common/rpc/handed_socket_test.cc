// Servers started on sockets handed to the process (common/base/listen_sockets.h):
// a gRPC server serves the handed socket and nothing else binds the port; a
// server on the same port after it binds afresh while the first one's
// connections live (the nccl2 ring after gen_nccl_id's server); LISTEN_FDS
// is read as systemd writes it; what is not a listening socket is refused
// naming the descriptor.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "common/base/listen_sockets.h"
#include "common/rpc/grpc_server.h"
#include "common/rpc/grpc_transport.h"
#include "common/rpc/rpc_client.h"
#include "gtest/gtest.h"
#include "tests/util/listen_socket.h"

namespace oar::rpc {
namespace {

// Counts the variables sent to it.
class CountingHandler : public RpcHandler {
 public:
  absl::Status Handle(RpcKind kind, const IncomingMessage& req, Reply* reply) override {
    if (kind == RpcKind::kSend) ++sends;
    return absl::OkStatus();
  }
  std::atomic<int> sends{0};
};

absl::Status SendOne(RpcClient* client, const std::string& ep) {
  Variable v;
  v.GetMutable<Tensor>()->mutable_data<float>({4})[0] = 1;
  return client->AsyncSendVar(ep, "w", &v, {.trainer_id = 0})->Wait();
}

TEST(HandedSocketTest, AGrpcServerServesTheSocketItsPortWasHandedWith) {
  const std::string ep = ReservedEndpoint();
  const int port = std::stoi(ep.substr(ep.rfind(':') + 1));
  CountingHandler h;
  ServerOptions o;
  o.endpoint = ep;
  auto server = GrpcServer::Start(o, &h);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->port(), port);
  EXPECT_EQ(TakeListenSocket(port), -1) << "the server took the socket";
  GrpcTransport transport;
  RpcClient client(&transport, ClientOptions{.deadline_ms = 10000, .retry_times = 0});
  ASSERT_TRUE(SendOne(&client, ep).ok());
  ASSERT_TRUE(SendOne(&client, ep).ok());
  EXPECT_EQ(h.sends, 2);

  // The first server ends while its client's connection lives; a second one
  // binds the port itself.
  (*server)->Shutdown();
  auto again = GrpcServer::Start(o, &h);
  ASSERT_TRUE(again.ok()) << again.status();
  GrpcTransport fresh;
  RpcClient client2(&fresh, ClientOptions{.deadline_ms = 10000, .retry_times = 3});
  ASSERT_TRUE(SendOne(&client2, ep).ok());
  EXPECT_EQ(h.sends, 3);
}

TEST(HandedSocketTest, WhatIsNotAListeningSocketIsRefusedNamingTheDescriptor) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);  // not listening
  absl::StatusOr<int> port = AdoptListenSocket(fd);
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().message(), "descriptor " + std::to_string(fd) + " is not a listening stream socket");
}

// LISTEN_FDS / LISTEN_PID as systemd and `oar launch` set them, read in a
// child process (they are read once per process).
TEST(HandedSocketTest, ListenFdsHandsDescriptorThreeAndIsUnsetForChildren) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const HandedSocket s = ListenForChild();
  EXPECT_EXIT(
      {
        ::dup2(s.fd, 3);
        ::setenv("LISTEN_FDS", "1", 1);
        ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
        const bool ok = AdoptInheritedListenSockets().ok();
        const bool unset = std::getenv("LISTEN_FDS") == nullptr && std::getenv("LISTEN_PID") == nullptr;
        std::exit(ok && unset && TakeListenSocket(s.port) == 3 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        ::setenv("LISTEN_FDS", "1", 1);
        ::setenv("LISTEN_PID", std::to_string(::getpid() + 1).c_str(), 1);  // another process's
        const bool ok = AdoptInheritedListenSockets().ok();
        std::exit(ok && TakeListenSocket(s.port) == -1 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  ::close(s.fd);
}

}  // namespace
}  // namespace oar::rpc
