#include "transpiler/transpiler_config.h"

#include "absl/strings/str_cat.h"

namespace oar {

absl::Status DistributeTranspilerConfig::Validate() const {
  if (min_block_size < 8192) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_block_size must be at least 8192 elements (as in Fluid), got ", min_block_size));
  }
  if (mode != "pserver" && mode != "nccl2") {
    return absl::InvalidArgumentError(absl::StrCat("mode must be \"pserver\" or \"nccl2\", got \"", mode, "\""));
  }
  if (enable_dc_asgd && sync_mode) {
    return absl::InvalidArgumentError("enable_dc_asgd applies to async training: set sync_mode to false");
  }
  if (geo_sgd_mode && (sync_mode || half_async)) {
    return absl::InvalidArgumentError("geo_sgd_mode is a mode of async training: set sync_mode (and half_async) false");
  }
  if (geo_sgd_need_push_nums < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("geo_sgd_need_push_nums must be at least 1, got ", geo_sgd_need_push_nums));
  }
  if (half_async && sync_mode) {
    return absl::InvalidArgumentError("half_async applies to async training: set sync_mode to false");
  }
  return absl::OkStatus();
}

DistributeTranspilerConfig DistributeTranspilerConfig::AsyncStrategy() {
  DistributeTranspilerConfig c;
  c.sync_mode = false;
  c.runtime_split_send_recv = true;
  return c;
}

DistributeTranspilerConfig DistributeTranspilerConfig::HalfAsyncStrategy() {
  DistributeTranspilerConfig c = AsyncStrategy();
  c.half_async = true;
  return c;
}

DistributeTranspilerConfig DistributeTranspilerConfig::GeoStrategy(int update_frequency) {
  DistributeTranspilerConfig c = AsyncStrategy();
  c.geo_sgd_mode = true;
  c.geo_sgd_need_push_nums = update_frequency;
  return c;
}

std::unique_ptr<PSDispatcher> DistributeTranspilerConfig::MakeDispatcher(std::vector<std::string> endpoints) const {
  if (split_method == SplitMethod::kHashName) return std::make_unique<HashName>(std::move(endpoints));
  return std::make_unique<RoundRobin>(std::move(endpoints));
}

absl::StatusOr<DistributeTranspilerConfig::SplitMethod> ParseSplitMethod(const std::string& name) {
  if (name == "roundrobin" || name == "RoundRobin") return DistributeTranspilerConfig::SplitMethod::kRoundRobin;
  if (name == "hashname" || name == "HashName") return DistributeTranspilerConfig::SplitMethod::kHashName;
  return absl::InvalidArgumentError(absl::StrCat("split method '", name, "': use roundrobin or hashname"));
}

}  // namespace oar
