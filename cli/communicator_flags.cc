#include "cli/communicator_flags.h"

#include "cli/rpc_flags.h"
#include "gflags/gflags.h"

DEFINE_int32(communicator_send_queue_size, 20,
             "communicator: gradients of one variable queued before the trainer's send op waits for its sender");
DEFINE_int32(communicator_max_merge_var_num, 20, "communicator: queued gradients of a variable merged into one send");
DEFINE_int32(communicator_send_wait_times, 5,
             "communicator: 10 ms waits for more gradients of a variable before a merged send goes");
DEFINE_int32(communicator_thread_pool_size, 5, "communicator: threads sending merged gradients");
DEFINE_bool(communicator_independent_recv_thread, true,
            "communicator: pull the parameters on a thread of their own (else after each round of sends)");
DEFINE_int32(communicator_min_send_grad_num_before_recv, 20,
             "communicator: steps' gradients sent between two pulls of the parameters");
DEFINE_bool(communicator_merge_sparse_grad, true,
            "communicator: sum the rows a sparse gradient repeats before sending it");
DEFINE_bool(communicator_is_sgd_optimizer, true,
            "communicator: merged gradients are summed (what an SGD pserver applies as the steps' updates); false: "
            "averaged");
DEFINE_bool(communicator_fake_rpc, false, "communicator, for measuring: merge the gradients but send nothing");

namespace oar::cli {

std::optional<CommunicatorOptions> CommunicatorOptionsFromFlags(const DistributeTranspilerConfig& config) {
  if (config.mode != "pserver" || config.sync_mode || config.geo_sgd_mode ||
      (!config.runtime_split_send_recv && !config.half_async)) {
    return std::nullopt;
  }
  CommunicatorOptions o;
  o.send_queue_size = FLAGS_communicator_send_queue_size;
  o.max_merge_var_num = FLAGS_communicator_max_merge_var_num;
  o.send_wait_times = FLAGS_communicator_send_wait_times;
  o.thread_pool_size = FLAGS_communicator_thread_pool_size;
  o.independent_recv_thread = FLAGS_communicator_independent_recv_thread;
  o.min_send_grad_num_before_recv = FLAGS_communicator_min_send_grad_num_before_recv;
  o.merge_sparse_grad = FLAGS_communicator_merge_sparse_grad;
  o.is_sgd_optimizer = FLAGS_communicator_is_sgd_optimizer;
  o.fake_rpc = FLAGS_communicator_fake_rpc;
  o.half_async = config.half_async;
  o.queue_wait = absl::Milliseconds(RpcOptionsFromFlags().deadline_ms);
  return o;
}

std::vector<GeoParam> GeoParamsOf(const DistributeTranspiler& t, int trainer_id) {
  std::vector<GeoParam> out;
  if (!t.config().geo_sgd_mode) return out;
  for (const SplitParam& sp : t.split_params()) {
    GeoParam p;
    p.name = sp.param;
    for (const auto& b : sp.param_blocks) {
      p.blocks.push_back(b.name);
      p.rows.push_back(b.shape.empty() ? 0 : b.shape[0]);
    }
    p.epmap = sp.endpoints;
    p.sparse = sp.grad_blocks[0].type == paddle::framework::proto::VarType::SELECTED_ROWS;
    p.trainer_id = trainer_id;
    out.push_back(std::move(p));
  }
  return out;
}

GeoOptions GeoOptionsOf(const DistributeTranspilerConfig& config, int trainers) {
  return {.need_push_nums = config.geo_sgd_need_push_nums, .trainers = trainers};
}

}  // namespace oar::cli
