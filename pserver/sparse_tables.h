// The pserver's distributed lookup tables, made before its startup program
// runs: every `W` of a lookup_sparse_table op in the pserver program becomes
// a SparseTable in `scope` (width from its declared shape), and each
// accumulator that an optimizer op keeps for such a table (Moment,
// Moment1, Moment2: declared SELECTED_ROWS) a SparseTable that follows the
// table's rows. The startup's initializer ops then set the tables' row
// initializers instead of allocating [rows, width] (tensor_ops.cc), and
// rows are made on first use.
//
// Thread-safety: call before the pserver serves; not concurrently with
// anything using `scope`.
#pragma once

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "common/framework/program_desc.h"
#include "common/framework/scope.h"

namespace oar {

// Makes the tables; returns their names (parameters and accumulators).
// InvalidArgument naming the variable when one is declared with no width,
// or already holds something else.
absl::StatusOr<std::set<std::string>> PrepareSparseTables(const ProgramDesc& pserver_program, Scope* scope);

// The parameter tables (W of lookup_sparse_table) of a pserver program.
std::set<std::string> DistributedTables(const ProgramDesc& pserver_program);

}  // namespace oar
