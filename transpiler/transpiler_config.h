// DistributeTranspilerConfig: Fluid's knobs for the DistributeTranspiler
// (../shared/reference: DistributeTranspilerConfig), with Fluid's defaults.
//
// Thread-safety: a value type.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transpiler/ps_dispatcher.h"

namespace oar {

struct DistributeTranspilerConfig {
  enum class SplitMethod { kRoundRobin, kHashName };
  bool slice_var_up = true;
  SplitMethod split_method = SplitMethod::kRoundRobin;
  int64_t min_block_size = 8192;  // elements; smaller is an error
  std::string mode = "pserver";   // "pserver" | "nccl2"
  bool sync_mode = true;
  bool runtime_split_send_recv = false;
  // Fluid 1.7+'s HalfAsync: async pservers, but a trainer's threads meet at
  // a send_barrier(half_async=true) each step, where its communicator
  // sends their merged gradients and pulls the parameters.
  bool half_async = false;
  // Fluid 1.6+'s GEO-SGD (GeoSgdTranspiler): each trainer trains with its
  // own optimizer and every geo_sgd_need_push_nums steps sends each
  // parameter's change since the last exchange (a sparse table's: the rows
  // it touched), divided by the trainer count; the pservers add it.
  bool geo_sgd_mode = false;
  int geo_sgd_need_push_nums = 100;
  bool wait_port = true;  // Fluid's; ignored (the transpiler does no network I/O)
  bool enable_dc_asgd = false;

  // Fluid 1.7+ fleet's strategies (StrategyFactory.create_async_strategy,
  // create_half_async_strategy, create_geo_strategy) as configs: async
  // training through the communicator, half-async, GEO-SGD.
  static DistributeTranspilerConfig AsyncStrategy();
  static DistributeTranspilerConfig HalfAsyncStrategy();
  static DistributeTranspilerConfig GeoStrategy(int update_frequency = 100);

  // InvalidArgument naming the field for a value Fluid would reject.
  absl::Status Validate() const;
  std::unique_ptr<PSDispatcher> MakeDispatcher(std::vector<std::string> endpoints) const;
};

// "roundrobin" | "hashname" (as `oar transpile --split-method` takes them).
absl::StatusOr<DistributeTranspilerConfig::SplitMethod> ParseSplitMethod(const std::string& name);

}  // namespace oar
