// The build's paths (build_paths.h), given by CMake to this file only.
#include "tests/util/build_paths.h"

#include <cstdlib>

namespace oar {
namespace {

std::string EnvOr(const char* name, const char* built) {
  const char* env = std::getenv(name);
  return env != nullptr && *env != '\0' ? env : built;
}

}  // namespace

std::string OarBinary() { return EnvOr("OAR_BINARY", OAR_BUILT_BINARY); }
std::string PserverMain() { return EnvOr("OAR_PSERVER_MAIN", OAR_BUILT_PSERVER_MAIN); }
std::string SourceDir() { return EnvOr("OAR_SOURCE_DIR", OAR_BUILT_SOURCE_DIR); }
std::string TestdataDir() { return EnvOr("OAR_TESTDATA_DIR", OAR_BUILT_SOURCE_DIR "/tests/testdata"); }

}  // namespace oar
