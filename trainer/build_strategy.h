// BuildStrategy and ExecutionStrategy: Fluid's knobs for how a
// ParallelExecutor builds its graph and runs it.
//
// Thread-safety: value types.
#pragma once

#include <string>

namespace oar {

struct BuildStrategy {
  enum class ReduceStrategy { kAllReduce, kReduce };
  enum class GradientScaleStrategy { kCoeffNumDevice, kOne, kCustomized };
  // kAllReduce: every place gets the sum of all places' gradients and runs
  // the optimizer. kReduce: each gradient is summed onto one owner place
  // (round robin), only the owner runs that parameter's optimizer ops, and
  // then broadcasts the new parameter to the others.
  ReduceStrategy reduce_strategy = ReduceStrategy::kAllReduce;
  // kCoeffNumDevice: loss@GRAD = 1 / (places × num_trainers); kOne: 1;
  // kCustomized: as the program fills it.
  GradientScaleStrategy gradient_scale_strategy = GradientScaleStrategy::kCoeffNumDevice;
  // When set, the SSA graph is written there as Graphviz dot on first build.
  std::string debug_graphviz_path;
  // Fuse elementwise_add + relu/sigmoid/tanh (and their grads) into
  // fused_elemwise_activation ops (fuse_elewise_add_act_pass.h).
  bool fuse_elewise_add_act_ops = false;
  // Across trainers (nccl2 mode): pack small gradients into buckets of up to
  // fuse_parameter_memory_size MB (Fluid's FLAGS_fuse_parameter_memory_size),
  // one all-reduce each.
  bool fuse_all_reduce_ops = false;
  double fuse_parameter_memory_size = 16.0;
};

struct ExecutionStrategy {
  int num_threads = 0;                     // 0: one per place
  int num_iteration_per_drop_scope = 100;  // local scopes dropped after this many runs
  int num_iteration_per_run = 1;           // steps per Run() call (same feed); fetches are the last step's
};

}  // namespace oar
