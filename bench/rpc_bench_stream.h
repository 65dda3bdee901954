// rpc_bench's figures 7: the stream transports (--rpc_transport=tcp and
// shm) to the bench's server process against a raw TCP stream to the same
// process (4 MiB push + pull, target >= 0.85x; 64 MiB in 16 blocks in
// flight, >= 0.80x; the 64 B round trip, <= 1.30x) and, for shared memory,
// the 4 MiB push + pull against memcpy of 4 MiB in this process (>= 0.5x).
// Also the tensors the bench sends.
//
// Thread-safety: single-threaded use.
#pragma once

#include <cstddef>
#include <string>

#include "bench/raw_tcp.h"
#include "common/variable.h"

namespace oar::bench {

inline constexpr size_t kMiB = 1 << 20;

// A float32 tensor of `bytes` bytes holding a fixed pattern.
Variable Floats(size_t bytes);

// Prints the figures; `ep` serves the bench's StoreHandler over gRPC and the
// stream transports.
void StreamFigures(const std::string& ep, RawTcpClient& raw);

}  // namespace oar::bench
