// rpc_bench's figures 7: the stream transports (--rpc_transport=tcp and
// shm) to the bench's server process against a raw TCP stream to the same
// process (4 MiB push + pull, target >= 0.85x; 64 MiB in 16 blocks in
// flight, >= 0.80x; the 64 B round trip, <= 1.30x) and, for shared memory,
// the 4 MiB push + pull against memcpy of 4 MiB in this process (>= 0.5x;
// the push lent as a trainer's gradient is, lent_sends.h; and, for
// comparison, through the rings both ways).
// Also the tensors the bench sends.
//
// Thread-safety: single-threaded use.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "bench/raw_tcp.h"
#include "common/framework/variable.h"

namespace oar::bench {

inline constexpr size_t kMiB = 1 << 20;

// A float32 tensor of `bytes` bytes holding a fixed pattern.
Variable Floats(size_t bytes);

// Prints the figures; `ep` serves the bench's StoreHandler over gRPC and the
// stream transports, in process `server` (which the round trips' figures
// pin to CPUs, as they do this thread, and then free again).
void StreamFigures(const std::string& ep, RawTcpClient& raw, pid_t server);

}  // namespace oar::bench
