// Gradient clipping, after fluid.clip: set on parameters (ParamAttr or
// set_gradient_clip) and applied by the optimizer before regularization:
//   GradientClipByValue(max, min) → clip(grad)
//   GradientClipByNorm(clip_norm) → clip_by_norm(grad)
//   GradientClipByGlobalNorm(clip_norm) → every grad in the group scaled by
//     clip_norm / max(clip_norm, sqrt(Σ reduce_sum(square(grad))))
// Ops get op_role Optimize and op_role_var [param, grad].
//
// Thread-safety: the clip objects are immutable; applying them is
// externally synchronized.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/api/param_attr.h"
#include "common/api/program.h"

namespace oar {

class GradientClip {
 public:
  virtual ~GradientClip() = default;
  // First pass over all (param, grad) of a program (global norm sums here).
  virtual void ProcessContext(std::map<std::string, Var>* context, const Var& param, const Var& grad) const {}
  // Second pass: returns the clipped gradient.
  virtual Var CreateOperators(std::map<std::string, Var>* context, const Var& param, const Var& grad) const = 0;
};

GradientClipPtr GradientClipByValue(float max, float min);
GradientClipPtr GradientClipByNorm(float clip_norm);
GradientClipPtr GradientClipByGlobalNorm(float clip_norm, const std::string& group_name = "default_group");

// Applies `clip` to `param_list` (every parameter when empty) of `program`.
void set_gradient_clip(const GradientClipPtr& clip, const std::vector<std::string>& param_list = {},
                       Program* program = nullptr);

std::vector<std::pair<Var, Var>> append_gradient_clip_ops(const std::vector<std::pair<Var, Var>>& params_grads);

}  // namespace oar
