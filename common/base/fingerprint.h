// Fingerprint: the 64-bit FNV-1a hash of a byte string — stable across
// processes, machines and builds (unlike absl::Hash, which is seeded per
// process), so two processes can compare what they hold by a number: the
// collectives' operation names, the fault injector's choices, a job's file
// listing (common/base/job_settings.h). Not a cryptographic hash.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <string_view>

namespace oar {

inline uint64_t Fingerprint(std::string_view bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return h;
}

}  // namespace oar
