// Weight decay, after fluid.regularizer: each appends the ops that compute a
// decay term from the parameter; append_regularization_ops adds it to the
// gradient with a `sum` op (op_role Optimize, op_role_var [param, grad]).
//   L2Decay(c): scale(param, c)          L1Decay(c): sign(param) then scale(c)
// A parameter's own ParamAttr::regularizer overrides the optimizer-wide one.
//
// Thread-safety: immutable after construction.
#pragma once

#include <utility>
#include <vector>

#include "common/api/param_attr.h"
#include "common/api/program.h"

namespace oar {

class WeightDecayRegularizer {
 public:
  virtual ~WeightDecayRegularizer() = default;
  // Appends the decay computation for `param` to `block`; returns the term.
  virtual Var Append(const Var& param, const Var& grad, BlockDesc* block) const = 0;
};

namespace regularizer {
RegularizerPtr L2Decay(float coeff);
RegularizerPtr L1Decay(float coeff);
}  // namespace regularizer

// Returns the pairs with each regularized gradient replaced by grad + decay.
std::vector<std::pair<Var, Var>> append_regularization_ops(const std::vector<std::pair<Var, Var>>& params_grads,
                                                           const RegularizerPtr& regularization);

}  // namespace oar
