// MergeGrads: what Fluid's communicator does to the gradients of one
// variable that several steps queued before its send thread took them: one
// value, their sum (an SGD optimizer on the pserver then applies the steps'
// updates as one) or their mean (other optimizers: one step of a gradient
// of the usual size). Dense tensors are added elementwise; SelectedRows
// (sparse gradients) are stacked row by row and, with `merge_rows`, rows
// that repeat are summed into one (sorted, as Fluid's MergeAdd leaves them).
//
//   OAR_ASSIGN_OR_RETURN(Variable merged, MergeGrads("fc_0.w_0@GRAD", queued, {.average = true}));
//
// Checked: every value is of one kind (dense or sparse), dtype (fp32 or
// fp64) and shape (a sparse one: height and row width); InvalidArgument
// naming the variable otherwise.
//
// Thread-safety: stateless; the inputs are read only.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/variable.h"

namespace oar {

struct MergeOptions {
  bool average = false;    // the mean of the values; false: their sum
  bool merge_rows = true;  // sparse: sum a row that several values carry into one
};

absl::StatusOr<Variable> MergeGrads(const std::string& name, const std::vector<const Variable*>& values,
                                    MergeOptions options = {});

}  // namespace oar
