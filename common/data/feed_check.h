// Checks what a data source gives against the program's feed variables
// (their VarDescs), so that a mismatch is an error naming where the data
// came from (file, line, array, slot) and the variable, before anything
// trains on it:
//  - dtype equal (no silent conversion: Paddle refuses it too);
//  - LoD: a variable with lod_level > 0 needs a source with LoD
//    (MultiSlot's sparse slots); LoD given to a variable without lod_level
//    is dropped where every example has one value (a label in a sparse
//    slot, as Fluid feeds it) and refused otherwise;
//  - shape: the first dimension is the batch; the rest of the variable's
//    shape must hold as many elements per example as the data, and the
//    batch is reshaped to it ([n, 784] fed to [-1, 1, 28, 28]). A variable
//    with a fixed first dimension takes only batches of that size.
//
// Thread-safety: stateless functions.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "common/framework/program_desc.h"
#include "common/framework/tensor.h"

namespace oar {

// Checks `t` (one batch, or a whole array whose first axis is examples) from
// `where` against `var`; on success `t` has the variable's shape.
absl::Status FitFeedToVar(const VarDesc& var, const std::string& where, Tensor* t);

// The feed variable `name` of block 0, or an error naming the program file.
absl::StatusOr<const VarDesc*> FeedVar(const ProgramDesc& program, const std::string& program_name,
                                       const std::string& name);

}  // namespace oar
