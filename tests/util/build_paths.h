// Where the build put what the tests and benches run or read: the `oar`
// binary, the two-process pserver harness, the source tree and its
// tests/testdata. An environment variable of the same name wins (a build
// copied to another machine: scripts/gpu-run.sh sets OAR_BINARY and
// OAR_TESTDATA_DIR).
//
// The paths are compiled into build_paths.cc alone, not into every test
// source: an absolute path in a test's compile line would make its object
// differ between two clones and miss the compiler cache (cmake/ccache.cmake).
//
// Thread-safety: any thread.
#pragma once

#include <string>

namespace oar {

std::string OarBinary();    // $OAR_BINARY, else <build>/cli/oar
std::string PserverMain();  // $OAR_PSERVER_MAIN, else <build>/tests/pserver_process_main
std::string SourceDir();    // $OAR_SOURCE_DIR, else the tree that was built
std::string TestdataDir();  // $OAR_TESTDATA_DIR, else <source>/tests/testdata

}  // namespace oar
