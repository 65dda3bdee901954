// The update kernels sgd, adagrad and adam run when their Param is a
// pserver's SparseTable (a distributed lookup table's shard): only the rows
// of the (merged) SelectedRows gradient move, in place; an accumulator
// (Moment, Moment1, Moment2) is a SparseTable that follows the parameter's
// rows. Adam on a table is lazy (untouched rows keep their moments), since a
// table's update is, by definition, of the rows received.
//
// Thread-safety: as the SparseTable: concurrent updates of one row race
// (Hogwild, as Fluid's async pservers).
#pragma once

#include "absl/status/status.h"
#include "common/framework/op_context.h"

namespace oar {

bool ParamIsTable(const ExecutionContext& ctx);
absl::Status TableSgd(const ExecutionContext& ctx);
absl::Status TableAdagrad(const ExecutionContext& ctx);
absl::Status TableAdam(const ExecutionContext& ctx);

}  // namespace oar
