// ThreadSanitizer annotations, for the few hand-offs whose synchronization
// TSan's model does not see (a standalone fence); no-ops in other builds.
//
//   OAR_TSAN_RELEASE(p)   this thread is done with what `p` names
//   OAR_TSAN_ACQUIRE(p)   this thread takes it over (after a fence)
//
// Thread-safety: macros.
#pragma once

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define OAR_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(OAR_TSAN)
#define OAR_TSAN 1
#endif

#ifdef OAR_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define OAR_TSAN_ACQUIRE(p) __tsan_acquire(const_cast<void*>(static_cast<const void*>(p)))
#define OAR_TSAN_RELEASE(p) __tsan_release(const_cast<void*>(static_cast<const void*>(p)))
#else
#define OAR_TSAN_ACQUIRE(p) ((void)0)
#define OAR_TSAN_RELEASE(p) ((void)0)
#endif
