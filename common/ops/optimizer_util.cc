#include "common/ops/optimizer_util.h"

namespace oar::optimizer_util {

absl::Status InferUpdateShape(InferShapeContext& ctx, const std::vector<std::string>& like_param,
                              const std::vector<std::string>& outs, const std::vector<std::string>& scalars) {
  const DDim p = ctx.InputDim("Param");
  if (ctx.InputDim("LearningRate").numel() != 1) {
    return ctx.Error("LearningRate must hold one value, got ", ctx.InputDim("LearningRate").ToString());
  }
  for (const auto& slot : like_param) {
    if (!ctx.HasInput(slot)) continue;
    DDim d = ctx.InputDim(slot);
    if (d.numel() >= 0 && p.numel() >= 0 && d.numel() != p.numel()) {
      return ctx.Error(slot, " ('", ctx.op().Input(slot)[0], "')", d.ToString(), " does not match Param ('",
                       ctx.op().Input("Param")[0], "')", p.ToString());
    }
  }
  for (const auto& slot : scalars) {
    if (ctx.InputDim(slot).numel() != 1) return ctx.Error(slot, " must hold one value");
  }
  // A pserver's sparse table (rows unknown at run time) is updated in
  // place; its kernel checks that.
  if (ctx.IsRuntime() && p.size() > 0 && p[0] < 0) return absl::OkStatus();
  for (const auto& slot : outs) ctx.SetOutputDim(slot, p);
  return absl::OkStatus();
}

}  // namespace oar::optimizer_util
