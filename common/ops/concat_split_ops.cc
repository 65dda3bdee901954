// concat and split along an axis, each the other's gradient (Fluid's split
// grad is a concat op; concat's grad splits Out@GRAD back into X@GRAD).
#include <cstring>

#include "absl/strings/str_join.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

int NormAxis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

// The shape of X's pieces joined along `axis`; they must agree elsewhere.
absl::StatusOr<DDim> ConcatDims(const InferShapeContext& ctx) {
  const size_t n = ctx.InputSize("X");
  DDim out = ctx.InputDim("X", 0);
  const int axis = NormAxis(ctx.Attr<int32_t>("axis"), out.size());
  if (axis < 0 || axis >= out.size())
    return ctx.Error("axis ", ctx.Attr<int32_t>("axis"), " out of range for rank ", out.size());
  for (size_t i = 1; i < n; ++i) {
    DDim d = ctx.InputDim("X", i);
    bool fits = d.size() == out.size();
    for (int k = 0; fits && k < d.size(); ++k) {
      fits = k == axis || d[k] < 0 || out[k] < 0 || d[k] == out[k];
    }
    if (!fits) {
      DDim want = ctx.InputDim("X", 0);
      std::string pattern = "[";
      for (int k = 0; k < want.size(); ++k) {
        absl::StrAppend(&pattern, k ? ", " : "", k == axis ? "*" : std::to_string(want[k]));
      }
      return ctx.Error("input ", InputLabel(ctx.op(), "X", i), " has shape ", d.ToString(), ", expected ", pattern,
                       "] (", InputLabel(ctx.op(), "X", 0), " is ", want.ToString(),
                       "; pieces may differ only along axis ", axis, ")");
    }
    out[axis] = (out[axis] < 0 || d[axis] < 0) ? -1 : out[axis] + d[axis];
  }
  return out;
}

absl::Status ConcatInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, ConcatDims(ctx));
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X", 0));
  return absl::OkStatus();
}

// Copies between one big tensor and its pieces along `axis`.
// to_big: pieces → big (concat); otherwise big → pieces (split).
void Stitch(Tensor* big, const std::vector<Tensor*>& pieces, int axis, bool to_big) {
  const DDim& d = big->dims();
  const int64_t outer = d.Product(0, axis);
  const int64_t inner = d.Product(axis + 1, d.size()) * static_cast<int64_t>(SizeOf(big->dtype()));
  const int64_t big_row = d[axis] * inner;
  char* b = static_cast<char*>(big->raw_data());
  int64_t offset = 0;
  for (Tensor* p : pieces) {
    const int64_t row = p->dims()[axis] * inner;
    char* pp = static_cast<char*>(p->raw_data());
    for (int64_t o = 0; o < outer; ++o) {
      if (to_big)
        std::memcpy(b + o * big_row + offset, pp + o * row, row);
      else
        std::memcpy(pp + o * row, b + o * big_row + offset, row);
    }
    offset += row;
  }
}

// Stitch copies bytes: every piece must be of the kernel's dtype T.
template <typename T>
absl::Status ConcatKernel(const ExecutionContext& ctx) {
  std::vector<Tensor*> pieces;
  for (size_t i = 0; i < ctx.InputSize("X"); ++i) {
    OAR_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, "X", i));
    OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", i, *t));
    pieces.push_back(const_cast<Tensor*>(t));  // read only
  }
  Tensor* out = ctx.Output("Out");
  out->mutable_data<T>();
  Stitch(out, pieces, NormAxis(ctx.Attr<int32_t>("axis"), out->dims().size()), true);
  return absl::OkStatus();
}

std::vector<OpDesc> ConcatGradMaker(const OpDesc& fwd) {
  return {MakeGradOp(fwd, "concat_grad", {"X"}, {}, {"Out"}, {"X"})};
}

absl::Status ConcatGradInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, ConcatDims(ctx));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Out"), out));
  for (size_t i = 0; i < ctx.OutputSize(GradVarName("X")); ++i) {
    ctx.SetOutputDim(GradVarName("X"), ctx.InputDim("X", i), i);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ConcatGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  std::vector<Tensor*> outs = ctx.MultiOutput(GradVarName("X"));
  std::vector<Tensor> scratch(outs.size());  // for @EMPTY@ pieces
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i] == nullptr) {
      scratch[i].Resize(ctx.Input("X", i)->dims());
      outs[i] = &scratch[i];
    }
    outs[i]->mutable_data(g->dtype());
  }
  Stitch(const_cast<Tensor*>(g), outs, NormAxis(ctx.Attr<int32_t>("axis"), g->dims().size()), false);
  return absl::OkStatus();
}

// ---- split ----

absl::Status SplitInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X");
  const int axis = NormAxis(ctx.Attr<int32_t>("axis"), x.size());
  if (axis < 0 || axis >= x.size()) return ctx.Error("axis out of range for X", x.ToString());
  auto sections = ctx.Attr<std::vector<int32_t>>("sections");
  const int num = ctx.Attr<int32_t>("num");
  const size_t outs = ctx.OutputSize("Out");
  std::vector<int64_t> sizes;
  if (!sections.empty()) {
    const std::string given = absl::StrCat("sections [", absl::StrJoin(sections, ", "), "]");
    int64_t total = 0, unknown = -1;
    for (size_t i = 0; i < sections.size(); ++i) {
      if (sections[i] == -1) {
        if (unknown >= 0) return ctx.Error(given, " have more than one -1");
        unknown = static_cast<int64_t>(i);
      } else if (sections[i] < 0) {
        return ctx.Error(given, ": section ", i, " is ", sections[i],
                         "; a size must be >= 0, or -1 (once) for the rest");
      } else {
        total += sections[i];
      }
      sizes.push_back(sections[i]);
    }
    if (x[axis] >= 0 && (unknown >= 0 ? total > x[axis] : total != x[axis])) {
      return ctx.Error(given, " do not fit X ('", ctx.op().Input("X")[0], "')", x.ToString(), ": they sum to ", total,
                       ", X has ", x[axis], " along axis ", axis);
    }
    if (unknown >= 0 && x[axis] >= 0) sizes[unknown] = x[axis] - total;
  } else {
    if (num <= 0) return ctx.Error("set `num` or `sections`");
    if (x[axis] >= 0 && x[axis] % num != 0)
      return ctx.Error("X", x.ToString(), " does not split evenly into ", num, " along axis ", axis);
    sizes.assign(num, x[axis] < 0 ? -1 : x[axis] / num);
  }
  if (sizes.size() != outs) return ctx.Error(sizes.size(), " pieces but ", outs, " outputs");
  for (size_t i = 0; i < outs; ++i) {
    DDim d = x;
    d[axis] = sizes[i];
    ctx.SetOutputDim("Out", d, i);
    ctx.SetOutputDtype("Out", ctx.InputDtype("X"), i);
  }
  return absl::OkStatus();
}

absl::Status SplitKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  std::vector<Tensor*> outs = ctx.MultiOutput("Out");
  for (Tensor* o : outs) o->mutable_data(x->dtype());
  Stitch(const_cast<Tensor*>(x), outs, NormAxis(ctx.Attr<int32_t>("axis"), x->dims().size()), false);
  return absl::OkStatus();
}

std::vector<OpDesc> SplitGradMaker(const OpDesc& fwd) {
  OpDesc g;
  g.type = "concat";
  std::vector<std::string> grads;
  for (const auto& o : fwd.Output("Out")) grads.push_back(GradVarName(o));
  g.SetInput("X", grads);
  g.SetOutput("Out", {GradVarName(fwd.Input("X")[0])});
  g.SetAttr("axis", fwd.GetAttr<int32_t>("axis"));
  return {g};
}

}  // namespace

void RegisterConcatSplitOps(OpRegistry* r) {
  r->Register("concat")
      .Input("X", kDuplicable)
      .Output("Out")
      .Attr("axis", int32_t{0})
      .SetInferShape(ConcatInferShape)
      .SetGradMaker(ConcatGradMaker)
      .Kernel<float>(ConcatKernel<float>)
      .Kernel<double>(ConcatKernel<double>)
      .Kernel<int64_t>(ConcatKernel<int64_t>);
  // Out: Fluid 1.0-1.3's default grad maker passed it; unread.
  r->Register("concat_grad")
      .Input("X", kDuplicable)
      .Input("Out", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDuplicable | kDispensable)
      .Attr("axis", int32_t{0})
      .SetInferShape(ConcatGradInferShape)
      .Kernel<float>(ConcatGradKernel<float>)
      .Kernel<double>(ConcatGradKernel<double>);
  r->Register("split")
      .Input("X")
      .Output("Out", kDuplicable)
      .Attr("axis", int32_t{0})
      .Attr("num", int32_t{0})
      .Attr("sections", std::vector<int32_t>{})
      .SetInferShape(SplitInferShape)
      .SetGradMaker(SplitGradMaker)
      .Kernel<float>(SplitKernel)
      .Kernel<double>(SplitKernel)
      .Kernel<int64_t>(SplitKernel);
}

}  // namespace oar
