// FreePorts: ports on 127.0.0.1 for the processes `oar launch` starts (the
// pservers', or the trainers' in nccl2 mode, and their metrics servers).
//
// They are picked below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), from a random place, each one
// checked free by binding it. A port the kernel hands to a socket bound to
// port 0 or to an outgoing connection is always inside that range, so the
// launched processes' own such sockets (a pserver's stream server, every
// connection) cannot take a chosen port before its process binds it —
// picking ports by binding port 0 lost that race about once in fifteen
// launches of a 2 x 2 job.
//
// Thread-safety: a function; two launches at once may still pick the same
// port (unlikely: random places in some 20000 ports).
#pragma once

#include <vector>

#include "absl/status/statusor.h"

namespace oar::cli {

absl::StatusOr<std::vector<int>> FreePorts(int n);

}  // namespace oar::cli
