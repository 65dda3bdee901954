#include "transpiler/optimize_pass.h"

#include <set>

namespace oar {

OptimizePass FindOptimizePass(const BlockDesc& block) {
  OptimizePass out;
  std::set<std::string> seen;
  const int32_t kOptimize = static_cast<int32_t>(OpRole::kOptimize);
  const int32_t kLRSched = static_cast<int32_t>(OpRole::kLRSched);
  for (size_t i = 0; i < block.OpSize(); ++i) {
    const OpDesc& op = block.Op(i);
    if (!op.HasAttr(kOpRoleAttr)) continue;
    const int32_t role = op.role();
    if (role & kLRSched) {
      out.lr_ops.push_back(i);
      continue;
    }
    if (role != kOptimize) continue;
    out.optimize_ops.push_back(i);
    const auto role_var = op.GetAttr<std::vector<std::string>>(kOpRoleVarAttr);
    if (role_var.size() >= 2 && seen.insert(role_var[0]).second)
      out.params_grads.emplace_back(role_var[0], role_var[1]);
  }
  return out;
}

}  // namespace oar
