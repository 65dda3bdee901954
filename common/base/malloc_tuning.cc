#include "common/base/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>

namespace oar {
namespace {

// Runs `set` for the first caller in the process, unless the operator
// tuned malloc through the environment; whether it ran and succeeded.
bool FirstPolicy(const std::function<bool()>& set) {
  static std::once_flag once;
  bool done = false;
  std::call_once(once, [&] {
    if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr || std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr) return;
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    if (tunables != nullptr && (std::strstr(tunables, "glibc.malloc.mmap_threshold") != nullptr ||
                                std::strstr(tunables, "glibc.malloc.trim_threshold") != nullptr)) {
      return;
    }
    done = set();
  });
  return done;
}

}  // namespace

bool MapLargeAllocations(size_t threshold) {
  return FirstPolicy([threshold] { return mallopt(M_MMAP_THRESHOLD, static_cast<int>(threshold)) == 1; });
}

bool KeepLargeAllocations() {
  return FirstPolicy(
      [] { return mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1; });
}

}  // namespace oar
