#include "cli/runtime_flags.h"

#include "common/device/gpu_info.h"
#include "common/framework/nan_inf_check.h"
#include "gflags/gflags.h"

DEFINE_bool(check_nan_inf, false,
            "after every op, check its float outputs for NaN and Inf and fail at the first op that wrote one, naming "
            "it and the variable (Fluid's FLAGS_check_nan_inf; slow: for finding where a training diverges)");
DEFINE_bool(gpu_allow_tf32, false,
            "let cuBLAS use TF32 tensor cores for float32 products (faster on A100/H100, but results "
            "then differ from the CPU's in the 4th significant digit)");
DEFINE_string(selected_gpus, "",
              "GPU ordinals this process uses, e.g. \"0,2\" (default: every GPU CUDA sees; "
              "the FLAGS_selected_gpus environment variable Fluid's launcher sets is read as this flag)");

namespace oar::cli {

void ApplyRuntimeFlags() {
  SetCheckNanInf(FLAGS_check_nan_inf);
  SetGpuAllowTf32(FLAGS_gpu_allow_tf32);
}

absl::StatusOr<std::vector<int>> SelectedGpusFromFlags() { return ParseSelectedGpus(FLAGS_selected_gpus, GpuCount()); }

}  // namespace oar::cli
