#include "transpiler/optimizer_shapes.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"

namespace oar {
namespace {

// Optimizer type → its inputs shaped like the parameter.
const std::map<std::string, std::set<std::string>>& ParamShapedSlots() {
  static const auto* table = new std::map<std::string, std::set<std::string>>{
      {"sgd", {}},
      {"adam", {"Moment1", "Moment2"}},
      {"adamw", {"Moment1", "Moment2"}},
      {"lamb", {"Moment1", "Moment2"}},
      {"adagrad", {"Moment"}},
      {"adamax", {"Moment", "InfNorm"}},
      {"momentum", {"Velocity"}},
      {"lars_momentum", {"Velocity"}},
      {"rmsprop", {"Moment", "MeanSquare", "MeanGrad"}},
      {"decayed_adagrad", {"Moment"}},
      {"ftrl", {"SquaredAccumulator", "LinearAccumulator"}},
  };
  return *table;
}

}  // namespace

absl::Status CheckPserverOptimizer(const std::string& op_type) {
  if (ParamShapedSlots().count(op_type)) return absl::OkStatus();
  std::string known;
  for (const auto& [t, _] : ParamShapedSlots()) absl::StrAppend(&known, known.empty() ? "" : ", ", t);
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer '", op_type, "' is not supported for distributed training; supported: ", known));
}

std::vector<int64_t> OptimizerInputShape(const std::string& op_type, const std::string& slot,
                                         const std::vector<int64_t>& orig_shape,
                                         const std::vector<int64_t>& param_block_shape) {
  auto it = ParamShapedSlots().find(op_type);
  if (it != ParamShapedSlots().end() && it->second.count(slot)) return param_block_shape;
  return orig_shape;
}

}  // namespace oar
