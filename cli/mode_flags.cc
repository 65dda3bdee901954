#include "cli/mode_flags.h"

#include "absl/strings/str_cat.h"
#include "cli/command.h"

namespace oar::cli {

absl::Status RefuseFlagsTheModeIgnores(const JobMode& mode) {
  struct Rule {
    bool applies;
    const char* flags[9];
    const char* why;
  };
  const Rule rules[] = {
      {mode.nccl2,
       {"no_slice", "split_method", "min_block_size", "runtime_split_send_recv", nullptr},
       "places variables' blocks on pservers; --mode nccl2 has none"},
      {!mode.nccl2, {"collective_transport", nullptr}, "is how nccl2 trainers all-reduce; use it with --mode nccl2"},
      {!mode.data_feed,
       {"files", "threads", "test_files", "skip_bad_lines", "debug", "dataset"},
       "goes with --data_feed (trainers that read MultiSlot files)"},
      {mode.data_feed && !mode.async_executor,
       {"threads", "debug", nullptr},
       "goes with --data_feed in async mode or with --model (AsyncExecutor threads); a program's sync or nccl2 "
       "trainers read with one thread and --prefetch"},
      {mode.async_executor,
       {"test_data", "dataset", "shuffle", "drop_last", "prefetch"},
       "applies to trainers that read through the data layer (a program in sync or nccl2 mode); AsyncExecutor "
       "threads stream the files"},
      {!mode.gpu, {"selected_gpus", "gpu_allow_tf32", nullptr}, "goes with --device gpu"},
      {!mode.communicator,
       {"communicator_send_queue_size", "communicator_max_merge_var_num", "communicator_send_wait_times",
        "communicator_thread_pool_size", "communicator_independent_recv_thread",
        "communicator_min_send_grad_num_before_recv", "communicator_merge_sparse_grad", "communicator_is_sgd_optimizer",
        "communicator_fake_rpc"},
       "tunes the communicator of async trainers: use it with --async and --runtime_split_send_recv or "
       "--half_async"},
      {!mode.geo, {"geo_sgd_need_push_nums", nullptr}, "goes with --geo_sgd_mode"},
  };
  for (const Rule& r : rules) {
    if (!r.applies) continue;
    for (const char* flag : r.flags) {
      if (flag != nullptr && FlagGiven(flag)) return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", r.why));
    }
  }
  return absl::OkStatus();
}

}  // namespace oar::cli
