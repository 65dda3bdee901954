// Which optimizer ops the pserver mode supports, and the shape each of their
// inputs takes on a pserver that holds one block of the parameter: an
// accumulator shaped like the parameter (Adam's moments, Momentum's
// velocity, ...) takes the block's shape; anything else (Adam's beta powers)
// keeps its own. The table is Fluid's _get_optimizer_input_shape.
//
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace oar {

// InvalidArgument naming the op type when pserver mode cannot place it.
absl::Status CheckPserverOptimizer(const std::string& op_type);

std::vector<int64_t> OptimizerInputShape(const std::string& op_type, const std::string& slot,
                                         const std::vector<int64_t>& orig_shape,
                                         const std::vector<int64_t>& param_block_shape);

}  // namespace oar
