// What the DistributeTranspiler moves to the pservers, found as Fluid's
// transpiler finds it in block 0 of the origin program:
//  - optimize ops: op_role exactly Optimize (so LR-schedule ops, marked
//    LRSched, are not among them);
//  - (param, grad) pairs: the op_role_var of those ops, first pair per
//    parameter, in program order;
//  - LR ops: op_role LRSched (with or without other bits), in order.
//
// Thread-safety: stateless.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/framework/program_desc.h"

namespace oar {

struct OptimizePass {
  std::vector<size_t> optimize_ops;                               // op indices
  std::vector<std::pair<std::string, std::string>> params_grads;  // (param, grad)
  std::vector<size_t> lr_ops;                                     // op indices
};

OptimizePass FindOptimizePass(const BlockDesc& block);

}  // namespace oar
