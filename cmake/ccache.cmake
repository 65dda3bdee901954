# Compiler cache: every compile (C++, and CUDA's host and device passes) goes
# through ccache when it is installed, unless -DOAR_CCACHE=OFF.
#
# The cache lives in one fixed directory per user (ccache's own default,
# ~/.cache/ccache, or $CCACHE_DIR), not in the build tree, so a fresh clone in
# another folder -- CI right after a session, the next session on the same
# machine, the sanitizer builds of a second checkout -- compiles only what
# changed. For that the cache key must not contain the clone's path:
#   CCACHE_BASEDIR   paths under the source tree are hashed relative to the
#                    compile's working directory, which is the same in every
#                    clone (for one generator: Ninja compiles in the build
#                    directory, Makefiles in each target's, so a cache filled
#                    by one serves the other little);
#   CCACHE_NOHASHDIR the working directory is left out of -g builds' key
#                    (the sanitizer builds use -g1).
# CCACHE_SLOPPINESS lets the compiles that use a precompiled header
# (cmake/pch.cmake) be cached: ccache hashes the header's contents instead.
# The debug info of an object taken from the cache names the folder it was
# first compiled in; nothing Oar ships reads it.
option(OAR_CCACHE "Compile through ccache when it is installed" ON)
if(OAR_CCACHE)
  find_program(OAR_CCACHE_PROGRAM ccache)
  if(OAR_CCACHE_PROGRAM)
    set(oar_ccache_launcher ${CMAKE_COMMAND} -E env
        CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} CCACHE_NOHASHDIR=1
        CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime ${OAR_CCACHE_PROGRAM})
    set(CMAKE_C_COMPILER_LAUNCHER ${oar_ccache_launcher})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${oar_ccache_launcher})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${oar_ccache_launcher})
    message(STATUS "oar: compiling through ${OAR_CCACHE_PROGRAM}")
  endif()
endif()
