#include "common/ops/op_util.h"

namespace oar {

absl::Status SameShapeAsX(InferShapeContext& ctx) {
  ctx.SetOutputDim("Out", ctx.InputDim("X"));
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  ctx.ShareLoD("X", "Out");
  return absl::OkStatus();
}

absl::Status GradSameShapeAsX(InferShapeContext& ctx) {
  const std::string gx = GradVarName("X");
  ctx.SetOutputDim(gx, ctx.InputDim("X"));
  ctx.SetOutputDtype(gx, ctx.InputDtype("X"));
  return absl::OkStatus();
}

absl::StatusOr<const Tensor*> RequireInput(const ExecutionContext& ctx,
                                           const std::string& slot, size_t i) {
  const Tensor* t = ctx.Input(slot, i);
  if (t == nullptr || !t->initialized()) {
    const auto& args = ctx.op().Input(slot);
    return absl::InvalidArgumentError(absl::StrCat(
        ctx.op().type, ": input ", slot, " ('", i < args.size() ? args[i] : "?",
        "') holds no tensor data"));
  }
  return t;
}

}  // namespace oar
