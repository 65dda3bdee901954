// StackRows: the blocks of a parameter the pservers keep (`w.block0`,
// `w.block1`, ...) stacked by rows into the whole — what a runtime-split
// recv op and the communicator's pulls make of what they receive.
//
//   OAR_RETURN_IF_ERROR(StackRows(blocks, names, endpoints, &param));
//
// Checked: every block is a dense tensor of the first one's dtype and row
// shape; InvalidArgument naming the block and where it came from otherwise.
//
// Thread-safety: stateless.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/framework/variable.h"

namespace oar {

absl::Status StackRows(const std::vector<Variable>& blocks, const std::vector<std::string>& names,
                       const std::vector<std::string>& endpoints, Tensor* out);

}  // namespace oar
