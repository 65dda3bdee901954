// Endpoints for the servers a test starts, listening before anything is
// told of them — no port is probed free and bound later, which another test
// running beside it could win (common/base/listen_sockets.h).
//
//   In this process:   std::string ep = ReservedEndpoint();  // then start a server on ep
//   In a child:        HandedSocket s = ListenForChild();
//                      spec.listen_fds.push_back(s.fd);       // cli::ProcessGroup hands it over
//                      or SpawnHanding(argv, {s.fd});          // a bench's own roles
//
// A reserved endpoint's socket is taken by the first server this process
// starts on its port; until then connections to it wait in its backlog.
//
// Thread-safety: any thread.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/base/listen_sockets.h"
#include "glog/logging.h"

namespace oar {

struct HandedSocket {
  int fd = -1;
  int port = 0;
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port); }
};

// A socket listening on 127.0.0.1 at a port the kernel picked, for a child
// process (ProcessGroup closes this process's copy when it hands it over).
inline HandedSocket ListenForChild() {
  HandedSocket s;
  absl::StatusOr<int> fd = ListenOnLoopback(&s.port);
  CHECK(fd.ok()) << fd.status();
  s.fd = *fd;
  return s;
}

// An endpoint whose socket listens already and is registered with this
// process, so that the server started on it here serves that socket.
inline std::string ReservedEndpoint() {
  HandedSocket s = ListenForChild();
  absl::StatusOr<int> port = AdoptListenSocket(s.fd);
  CHECK(port.ok()) << port.status();
  return s.endpoint();
}

// Starts `args` (args[0]: the program's path) with `fds` handed to it as
// descriptors 3, 4, ... and LISTEN_FDS set (the child calls
// AdoptInheritedListenSockets), closing this process's copies; its pid, or
// -1 when it could not start.
inline pid_t SpawnHanding(std::vector<std::string> args, const std::vector<int>& fds) {
  std::vector<std::string> env = {"LISTEN_FDS=" + std::to_string(fds.size())};
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("LISTEN_FDS=", 0) != 0 && kv.rfind("LISTEN_PID=", 0) != 0) env.push_back(kv);
  }
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  // Out of the way first (a handed descriptor may sit where another must go).
  std::vector<int> high;
  for (int fd : fds) high.push_back(::fcntl(fd, F_DUPFD_CLOEXEC, 100));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (size_t i = 0; i < high.size(); ++i) posix_spawn_file_actions_adddup2(&actions, high[i], 3 + static_cast<int>(i));
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data()) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  for (int fd : high) ::close(fd);
  for (int fd : fds) ::close(fd);
  return pid;
}

}  // namespace oar
