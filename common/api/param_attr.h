// ParamAttr, after fluid.ParamAttr: how a layer creates one of its
// parameters. Unset fields take the layer's defaults (a generated name such
// as "fc_0.w_0", Xavier for weights, Constant(0) for biases).
//
//   layers::fc(x, 10, "softmax", ParamAttr{.name = "out_w",
//              .initializer = initializer::Constant(0.1f)});
//
// Thread-safety: a value type.
#pragma once

#include <string>

#include "common/api/initializer.h"

namespace oar {

class WeightDecayRegularizer;  // regularizer.h
class GradientClip;            // clip.h
using RegularizerPtr = std::shared_ptr<const WeightDecayRegularizer>;
using GradientClipPtr = std::shared_ptr<const GradientClip>;

struct ParamAttr {
  std::string name;            // empty: generated
  InitializerPtr initializer;  // null: the layer's default
  float learning_rate = 1.0f;  // multiplies the optimizer's rate
  bool trainable = true;
  RegularizerPtr regularizer;     // overrides the optimizer's regularization
  GradientClipPtr gradient_clip;  // applied to this parameter's gradient
  // A layer given a ParamAttr with `disabled` set creates no such parameter
  // (Fluid's bias_attr=False).
  bool disabled = false;
};

// Fluid's bias_attr=False.
inline ParamAttr NoBias() {
  ParamAttr a;
  a.disabled = true;
  return a;
}

}  // namespace oar
