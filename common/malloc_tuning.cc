#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <mutex>

namespace oar {

bool MapLargeAllocations(size_t threshold) {
  static std::once_flag once;
  static bool set = false;
  std::call_once(once, [&] {
    if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr) return;
    set = mallopt(M_MMAP_THRESHOLD, static_cast<int>(threshold)) == 1;
  });
  return set;
}

}  // namespace oar
