// OAR_AVX2_CLONES: compile a hot loop twice, for AVX2 and for the baseline
// x86-64, and let the loader pick the one this CPU runs (GCC's
// target_clones). The AVX2 clone enables no FMA, so both clones round
// alike and a result does not depend on the machine.
//
// Put it on plain functions, one overload per type. Only GCC clones: clang
// (the sanitizer and fuzz builds) cannot clone a function template, and
// clang 14 compiles a cloned function for AVX2 alone, with no resolver and
// no baseline. Under TSan there are no clones: the loader runs their
// resolver before TSan's runtime exists.
//
// Thread-safety: a macro.
#pragma once

#include "common/base/tsan.h"

#if defined(OAR_TSAN) || defined(__clang__) || !(defined(__x86_64__) || defined(__i386__))
#define OAR_AVX2_CLONES
#else
#define OAR_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#endif
