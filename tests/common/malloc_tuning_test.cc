// The two malloc policies a process takes by role (common/base/malloc_tuning.h),
// each checked in a child process of its own, started afresh (a policy is
// set once per process, and a forked child would inherit the test
// process's heap): whether a large block gets its own mapping, seen
// through glibc's mallinfo2 counters.
#include "common/base/malloc_tuning.h"

#include <malloc.h>
#include <stdlib.h>

#include <cstdlib>

#include "gtest/gtest.h"

namespace oar {
namespace {

// A sanitizer's allocator replaces glibc's, mallopt included (GCC says so
// with __SANITIZE_*__, clang with __has_feature).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Mappings that hold one live block each, and bytes of the main heap.
size_t MappedBlocks() { return mallinfo2().hblks; }
size_t HeapBytes() { return mallinfo2().arena; }
// A block the compiler may not elide (an unused malloc may be dropped).
void* Allocate(size_t bytes) {
  void* p = std::malloc(bytes);
  asm volatile("" : : "r"(p) : "memory");
  return p;
}

// Each child: a fresh process, with none of the operator's tunables.
void FreshChildren() {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* v : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"}) ::unsetenv(v);
}

TEST(MallocTuningTest, ATrainerKeepsLargeFreedBlocksInItsHeap) {
  if (kSanitized) GTEST_SKIP() << "a sanitizer's allocator ignores glibc's tunables";
  FreshChildren();
  EXPECT_EXIT(
      {
        if (!KeepLargeAllocations()) std::_Exit(2);
        const size_t mapped = MappedBlocks();
        void* p = Allocate(8 << 20);
        if (MappedBlocks() != mapped) std::_Exit(3);  // given a mapping of its own
        const size_t heap = HeapBytes();
        std::free(p);
        if (HeapBytes() < heap) std::_Exit(4);     // the heap was trimmed back to the system
        if (MapLargeAllocations()) std::_Exit(5);  // the first policy stays
        std::_Exit(0);
      },
      testing::ExitedWithCode(0), "");
}

TEST(MallocTuningTest, APserverMapsEachLargeBlock) {
  if (kSanitized) GTEST_SKIP() << "a sanitizer's allocator ignores glibc's tunables";
  FreshChildren();
  EXPECT_EXIT(
      {
        if (!MapLargeAllocations()) std::_Exit(2);
        const size_t mapped = MappedBlocks();
        void* p = Allocate(2 << 20);
        if (MappedBlocks() != mapped + 1) std::_Exit(3);
        std::free(p);
        if (MappedBlocks() != mapped) std::_Exit(4);  // returned to the system at once
        if (KeepLargeAllocations()) std::_Exit(5);
        std::_Exit(0);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace oar
