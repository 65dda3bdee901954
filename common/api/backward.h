// append_backward, after fluid.backward.append_backward: appends to the
// loss's block the gradient ops of every op on the path to `loss`, in reverse
// order, with Fluid's conventions:
//   - `loss@GRAD` is filled with 1 by fill_constant, op_role Backward|Loss,
//     and the op producing the loss gets op_role Forward|Loss;
//   - gradients of variables with stop_gradient (data, labels) or in
//     `no_grad_set` are not computed (@EMPTY@), and grad ops left with no
//     output are dropped;
//   - a variable used by several ops gets one renamed gradient per use
//     (x@GRAD@RENAME@0, ...) summed by a `sum` op;
//   - every grad op has op_role Backward; the op producing a parameter's
//     gradient carries op_role_var [param, param@GRAD].
//
// Returns (parameter, gradient) pairs for the trainable parameters in
// `parameter_list` (all of the program's parameters when empty) in the
// order given (creation order by default). On error records it in the
// program and returns an empty list.
//
// Thread-safety: externally synchronized.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/api/program.h"

namespace oar {

std::vector<std::pair<Var, Var>> append_backward(const Var& loss, const std::vector<std::string>& parameter_list = {},
                                                 const std::set<std::string>& no_grad_set = {});

}  // namespace oar
