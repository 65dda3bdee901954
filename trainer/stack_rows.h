// Runtime split (runtime_split_send_recv): a variable and the blocks the
// pservers keep of it (`w.block0`, `w.block1`, ...), both ways.
//
// SplitByRows: a gradient cut by rows into its blocks, as a runtime-split
// send op and the communicator send it — a dense tensor into views (no
// copy), a sparse one (SelectedRows, e.g. an is_sparse embedding's) into
// the rows each block holds, renumbered from the block's first row, as
// split_selected_rows cuts it.
//
//   OAR_ASSIGN_OR_RETURN(std::vector<Variable> parts, SplitByRows(grad, sections, "send: 'w@GRAD'"));
//
// StackRows: the blocks of a parameter stacked by rows into the whole —
// what a runtime-split recv op and the communicator's pulls make of what
// they receive.
//
//   OAR_RETURN_IF_ERROR(StackRows(blocks, names, endpoints, &param));
//
// Checked: sections that do not cut the variable's rows, a sparse row
// outside them; for StackRows every block is a dense tensor of the first
// one's dtype and row shape. InvalidArgument naming `what` (the block and
// where it came from) otherwise.
//
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/variable.h"

namespace oar {

// `sections` rows per block (Fluid's send attribute), adding up to the
// variable's rows (a sparse one's height).
absl::StatusOr<std::vector<Variable>> SplitByRows(const Variable& grad, const std::vector<int64_t>& sections,
                                                  const std::string& what);

absl::Status StackRows(const std::vector<Variable>& blocks, const std::vector<std::string>& names,
                       const std::vector<std::string>& endpoints, Tensor* out);

}  // namespace oar
