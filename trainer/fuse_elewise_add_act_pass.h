// The fuse_elewise_add_act pass (BuildStrategy::fuse_elewise_add_act_ops):
// rewrites a block so that
//   elementwise_add(X, Y) -> t ; act(t) -> out          (act: relu, sigmoid, tanh)
// becomes one fused_elemwise_activation(X, Y) -> Out=out, IntermediateOut=t
// with functor_list [act, "elementwise_add"], and the matching backward pair
//   act_grad(Out=out, Out@GRAD) -> dt ; elementwise_add_grad(Out@GRAD=dt) -> dX, dY
// becomes one fused_elemwise_activation_grad, as Fluid's pass does. Only
// adjacent pairs are fused, so no other op can observe the reordering.
//
// Thread-safety: mutates the given block; no shared state.
#pragma once

#include "common/framework/program_desc.h"

namespace oar {

struct FuseCounts {
  int forward = 0;
  int backward = 0;
};

FuseCounts FuseElewiseAddAct(BlockDesc* block);

}  // namespace oar
