// Listening TCP sockets handed to this process, so that its servers need not
// bind the ports they were told to serve on — the race-free way to start a
// job whose endpoints must be known before its processes start (a
// transpiled program carries them): the starter binds port 0, learns the
// port, and hands the socket over.
//
// Two ways in:
//  - across exec, systemd's socket-activation convention: the sockets are
//    file descriptors 3, 4, ... and LISTEN_FDS says how many (LISTEN_PID,
//    when set, must name this process). `oar launch` hands each child its
//    sockets this way, and so can a test or a service manager.
//    AdoptInheritedListenSockets() (the binary's start-up) takes them.
//  - within a process, AdoptListenSocket(fd) (a test starting servers on
//    ports it bound itself).
//
// A server about to bind host:PORT first asks TakeListenSocket(PORT): it
// gets the handed socket (and owns it) or -1 and binds as usual. Each socket
// is taken once; a later server on the same port binds it afresh.
//
// Thread-safety: every function may be called from any thread.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace oar {

// Registers `fd`, a listening TCP socket, taking ownership; returns the port
// it is bound to. InvalidArgument (and `fd` closed) when it is not one.
absl::StatusOr<int> AdoptListenSocket(int fd);

// Takes the sockets of LISTEN_FDS (fds 3 ..), once per process, and unsets
// LISTEN_FDS, LISTEN_PID and LISTEN_FDNAMES so that children do not see
// them. Nothing to do when LISTEN_FDS is unset or LISTEN_PID names another
// process. An error names the descriptor that is not a listening socket.
absl::Status AdoptInheritedListenSockets();

// The handed socket bound to `port`, now owned by the caller; -1 if none.
int TakeListenSocket(int port);

// A new socket listening on 127.0.0.1 at a port the kernel picked, with
// FD_CLOEXEC set (hand it to a child explicitly); `*port` receives the port.
absl::StatusOr<int> ListenOnLoopback(int* port);

}  // namespace oar
