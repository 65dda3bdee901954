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

std::string InputLabel(const OpDesc& op, const std::string& slot, size_t i) {
  const auto& args = op.Input(slot);
  const std::string name = i < args.size() ? args[i] : "?";
  if (args.size() > 1) return absl::StrCat("'", name, "' (", slot, "[", i, "])");
  return absl::StrCat("'", name, "' (", slot, ")");
}

DDim XShapeOf(const DDim& x) {
  DDim d{0};
  for (int64_t v : x) d.push_back(v);
  return d;
}

DDim FromXShape(const DDim& xshape) {
  DDim d;
  for (int i = 1; i < xshape.size(); ++i) d.push_back(xshape[i]);
  return d;
}

bool SameScalar(const DDim& a, const DDim& b) { return a.size() <= 1 && b.size() <= 1 && a.numel() == 1 && b.numel() == 1; }

absl::Status ExpectInputDims(const InferShapeContext& ctx, const std::string& slot, const DDim& want, size_t i) {
  if (!ctx.IsRuntime()) return absl::OkStatus();
  const DDim got = ctx.InputDim(slot, i);
  if (got == want || SameScalar(got, want)) return absl::OkStatus();
  return ctx.Error("input ", InputLabel(ctx.op(), slot, i), " has shape ", got.ToString(), ", expected ",
                   want.ToString());
}

absl::Status ExpectLikeInput(const InferShapeContext& ctx, const std::string& slot, const std::string& like) {
  if (!ctx.IsRuntime()) return absl::OkStatus();
  const DDim got = ctx.InputDim(slot), want = ctx.InputDim(like);
  if (got != want && !SameScalar(got, want)) {
    return ctx.Error("input ", InputLabel(ctx.op(), slot), " has shape ", got.ToString(), ", expected ",
                     want.ToString(), " (the shape of ", InputLabel(ctx.op(), like), ")");
  }
  if (ctx.InputDtype(slot) != ctx.InputDtype(like)) {
    return ctx.Error("input ", InputLabel(ctx.op(), slot), " has dtype ", DataTypeName(ctx.InputDtype(slot)),
                     ", expected ", DataTypeName(ctx.InputDtype(like)), " (the dtype of ",
                     InputLabel(ctx.op(), like), ")");
  }
  return absl::OkStatus();
}

}  // namespace oar
