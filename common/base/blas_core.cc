#include "common/base/blas_core.h"

#include <unistd.h>

#include <cblas.h>

#include <cstdlib>

#include "absl/strings/ascii.h"

namespace oar {

int BlasCoreClass(const std::string& core) {
  const std::string name = absl::AsciiStrToLower(core);
  for (const char* n : {"skylakex", "cooperlake", "sapphirerapids"}) {
    if (name == n) return 3;
  }
  for (const char* n : {"haswell", "zen", "excavator"}) {
    if (name == n) return 2;
  }
  for (const char* n : {"sandybridge", "bulldozer", "piledriver", "steamroller"}) {
    if (name == n) return 1;
  }
  return 0;
}

// libgcc's checks include the OS's support (XCR0) for the wider registers.
std::string CpuBlasCore() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  if (__builtin_cpu_supports("avx")) return "Sandybridge";
  return "";
}

std::string BlasCoreName() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

std::string BetterBlasCore() {
  const std::string best = CpuBlasCore();
  return BlasCoreClass(best) > BlasCoreClass(BlasCoreName()) ? best : "";
}

void ReexecWithBestBlasCore(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::string core = BetterBlasCore();
  if (core.empty()) return;
  // Silent: a command's output stays its own. The child inherits the
  // variable (so it does not re-exec) and BlasCoreName() reports the result.
  if (setenv("OPENBLAS_CORETYPE", core.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // the exec failed: go on as we were
}

}  // namespace oar
