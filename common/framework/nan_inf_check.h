// check_nan_inf (Fluid's FLAGS_check_nan_inf, a process-wide switch that
// `oar` sets from --check_nan_inf or that environment variable): after
// every op, its float outputs are scanned for NaN and Inf, and the first op
// that writes one fails the run, naming the op, the output variable and
// slot, how many values are not finite and where the first one is — the
// op where a diverging training first went wrong, rather than the loss
// that shows it several ops later. Slow (every output is read once more,
// and a GPU output is copied to the host first): for finding a fault, not
// for production runs.
//
// Thread-safety: CheckOutputsFinite reads only the op's own outputs; call
// it from the thread that ran the op. The switch is an atomic.
#pragma once

#include "absl/status/status.h"
#include "common/framework/op_context.h"
#include "common/framework/program_desc.h"

namespace oar {

// Whether executors check every op's outputs (off unless set).
void SetCheckNanInf(bool on);
bool CheckNanInf();

// OK when every float32/float64 value `op` wrote (its Tensor and
// SelectedRows outputs) is finite; else InvalidArgument naming the first
// output that holds a NaN or Inf.
absl::Status CheckOutputsFinite(const OpDesc& op, const OpBinding& binding);

}  // namespace oar
