// OpenBLAS's kernel set, checked against the CPU it runs on.
//
// Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels from the CPU
// model when the library loads; a model newer than the library (family 6
// model 207, Emerald Rapids, among them) falls back to "Prescott", the SSE3
// kernels: 31.6 GFLOP/s on one core for a 128x784x256 sgemm where the
// SkylakeX kernels reach 132 on the same core. OPENBLAS_CORETYPE overrides
// the choice, but only before the library loads, so the fix is to set it and
// re-exec the binary once:
//
//   int main(int argc, char** argv) {
//     oar::ReexecWithBestBlasCore(argv);  // first thing, before any thread
//
// A user's OPENBLAS_CORETYPE is always left as it is.
//
// Thread-safety: call from main before any other thread exists (it may
// replace the process image).
#pragma once

#include <string>

namespace oar {

// Vector class of an OpenBLAS core name: 3 AVX-512 (SkylakeX, Cooperlake,
// SapphireRapids), 2 AVX2+FMA (Haswell, Zen, Excavator), 1 AVX
// (Sandybridge, Bulldozer, ...), 0 older or unknown (Prescott, Core2, ...).
int BlasCoreClass(const std::string& core);

// The best core name this CPU and its OS support, by the same classes
// ("SkylakeX", "Haswell", "Sandybridge", or "" for none of them).
std::string CpuBlasCore();

// The OPENBLAS_CORETYPE that this CPU supports and that beats the kernels
// OpenBLAS chose ("SkylakeX" for AVX-512, "Haswell" for AVX2+FMA,
// "Sandybridge" for AVX), or "" when OpenBLAS's choice is as good.
std::string BetterBlasCore();

// When BetterBlasCore() names one and OPENBLAS_CORETYPE is unset: sets it
// and execs /proc/self/exe with argv, logging the change once (the child
// inherits the variable, so it does not re-exec). Returns (and changes
// nothing) when there is nothing to gain or the exec fails.
void ReexecWithBestBlasCore(char** argv);

// The kernel set OpenBLAS runs ("SkylakeX", "Prescott", ...), for logs and
// benchmark headers.
std::string BlasCoreName();

}  // namespace oar
