// FdAcceptor: accepts connections on a listening socket the process was
// handed (common/base/listen_sockets.h) on a thread of its own, and passes each
// new connection to a callback — for servers, like gRPC's, that can serve a
// connected descriptor but not adopt a listening one.
//
//   FdAcceptor a(fd, [&](int conn) { grpc::AddInsecureChannelFromFd(server, conn); });
//   ...
//   a.Stop();  // no callback runs after it returns
//
// Thread-safety: the callback runs on the acceptor's thread, one connection
// at a time; Stop (and the destructor) from the owner, once the callback's
// target still lives.
#pragma once

#include <functional>
#include <thread>

namespace oar::rpc {

class FdAcceptor {
 public:
  // Owns `listen_fd` from here on; `on_connection` owns each descriptor it gets.
  FdAcceptor(int listen_fd, std::function<void(int)> on_connection);
  ~FdAcceptor();
  FdAcceptor(const FdAcceptor&) = delete;
  FdAcceptor& operator=(const FdAcceptor&) = delete;

  // Stops accepting, joins the thread, closes the listening socket.
  void Stop();

 private:
  void Loop();

  int listen_fd_;
  int wake_[2] = {-1, -1};  // a pipe: a byte written to wake_[1] ends Loop
  std::function<void(int)> on_connection_;
  std::thread thread_;
};

}  // namespace oar::rpc
