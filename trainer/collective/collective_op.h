// What the byte-moving Collective backends (tcp_ring.h, shm_collective.h)
// write into each operation's header so that ranks can check they agree:
// the operation's code and name, and a hash of the tensor's whole name.
//
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <string>

#include "common/base/fingerprint.h"

namespace oar {

enum CollectiveOp : uint8_t { kAllReduce = 1, kBroadcast = 2, kAllGather = 3, kBarrier = 4 };

inline const char* CollectiveOpName(uint8_t op) {
  switch (op) {
    case kAllReduce:
      return "AllReduce";
    case kBroadcast:
      return "Broadcast";
    case kAllGather:
      return "AllGather";
    case kBarrier:
      return "Barrier";
  }
  return "?";
}

// 64-bit FNV-1a of `name` (common/base/fingerprint.h).
inline uint64_t NameHash(const std::string& name) { return Fingerprint(name); }

}  // namespace oar
