// FLAGS_check_nan_inf (Fluid's flag, and its environment variable): after
// every op, its float outputs are scanned for NaN and Inf, and the first op
// that writes one fails the run, naming the op, the output variable and
// slot, how many values are not finite and where the first one is — the
// op where a diverging training first went wrong, rather than the loss
// that shows it several ops later. Slow (every output is read once more,
// and a GPU output is copied to the host first): for finding a fault, not
// for production runs.
//
// Thread-safety: CheckOutputsFinite reads only the op's own outputs; call
// it from the thread that ran the op.
#pragma once

#include "absl/status/status.h"
#include "common/framework/op_context.h"
#include "common/framework/program_desc.h"
#include "gflags/gflags_declare.h"

DECLARE_bool(check_nan_inf);

namespace oar {

// OK when every float32/float64 value `op` wrote (its Tensor and
// SelectedRows outputs) is finite; else InvalidArgument naming the first
// output that holds a NaN or Inf.
absl::Status CheckOutputsFinite(const OpDesc& op, const OpBinding& binding);

}  // namespace oar
