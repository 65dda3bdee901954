# Precompiled headers for GCC builds (make build/test/demo): the standard,
# Abseil, glog and protobuf headers nearly every source includes through
# common/framework/op_registry.h and friends -- some 170k lines per source -- are parsed
# once per PCH instead of once per source. The libraries share one PCH, the
# test binaries another (with GoogleTest); a target whose flags differ from its
# PCH's only loses the speed (-Winvalid-pch warns), never correctness.
#
# Off for clang (the sanitizer builds): a clang PCH records the paths of the
# headers it holds, and one taken from the compiler cache in another clone
# would name files that are gone.
option(OAR_PCH "Precompile the common third-party headers (GCC builds)" ON)
set(OAR_PCH_ENABLED OFF)
if(OAR_PCH AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(OAR_PCH_ENABLED ON)
  # A PCH serves only compiles that define the same macros. gRPC's targets
  # add -pthread (_REENTRANT) and Boost's BOOST_ALL_NO_LIB to what links
  # them; every C++ compile gets both, so one PCH serves every library.
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-pthread>)
  add_compile_definitions($<$<COMPILE_LANGUAGE:CXX>:BOOST_ALL_NO_LIB>)
endif()

set(OAR_PCH_HEADERS
  <algorithm> <atomic> <cmath> <cstdint> <cstring> <functional> <map> <memory>
  <set> <string> <thread> <unordered_map> <utility> <vector>
  [["absl/container/flat_hash_map.h"]] [["absl/status/status.h"]] [["absl/status/statusor.h"]]
  [["absl/strings/str_cat.h"]] [["absl/strings/str_join.h"]] [["absl/synchronization/mutex.h"]]
  [["absl/time/time.h"]] [["glog/logging.h"]] [["proto/framework.pb.h"]])

# oar_precompile(TARGET [REUSE_FROM OTHER] [TESTS]): TARGET's C++ sources get
# the PCH, built for it or reused from OTHER; TESTS adds GoogleTest.
function(oar_precompile target)
  cmake_parse_arguments(arg "TESTS" "REUSE_FROM" "" ${ARGN})
  if(NOT OAR_PCH_ENABLED)
    return()
  endif()
  if(arg_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${arg_REUSE_FROM})
    return()
  endif()
  set(headers ${OAR_PCH_HEADERS})
  if(arg_TESTS)
    list(APPEND headers [["gtest/gtest.h"]])
  endif()
  target_precompile_headers(${target} PRIVATE ${headers})  # C++ only: CMake has no CUDA PCH
endfunction()
