// Padding, as Fluid and Paddle write it: pad (Fluid's layers.pad: any rank,
// `paddings` a before/after pair per dimension, a constant) and pad3d
// (Paddle 2.x's nn.Pad1D/2D/3D and F.pad: NCDHW, `paddings` [left, right,
// top, bottom, front, back], mode constant, reflect, replicate or circular),
// with their gradients: each output cell reads one input cell (or the
// constant), and the gradient adds each output cell's back into it.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

enum class Mode { kConstant, kReflect, kReplicate, kCircular };

struct PadPlan {
  DDim in, out;
  std::vector<int64_t> before;  // per dimension
  Mode mode = Mode::kConstant;
};

absl::StatusOr<PadPlan> Plan(const ExecutionContext& ctx, const DDim& x) {
  const std::string& type = ctx.op().type;
  const std::vector<int32_t> p = ctx.Attr<std::vector<int32_t>>("paddings");
  PadPlan plan{.in = x, .out = x};
  plan.before.assign(static_cast<size_t>(x.size()), 0);
  std::vector<int64_t> after(static_cast<size_t>(x.size()), 0);
  if (!absl::StartsWith(type, "pad3d")) {
    if (static_cast<int>(p.size()) != 2 * x.size()) {
      return absl::InvalidArgumentError(absl::StrCat("pad: paddings [", absl::StrJoin(p, ", "),
                                                     "] must hold two values "
                                                     "per dimension of X",
                                                     x.ToString()));
    }
    for (int d = 0; d < x.size(); ++d) plan.before[d] = p[2 * d], after[d] = p[2 * d + 1];
  } else {
    const std::string mode = ctx.Attr<std::string>("mode");
    if (x.size() != 5 || p.size() != 6) {
      return absl::InvalidArgumentError(absl::StrCat("pad3d: X", x.ToString(), " must be 5-D and paddings [",
                                                     absl::StrJoin(p, ", "), "] hold six values"));
    }
    plan.mode = mode == "reflect"     ? Mode::kReflect
                : mode == "replicate" ? Mode::kReplicate
                : mode == "circular"  ? Mode::kCircular
                                      : Mode::kConstant;
    if (mode != "constant" && plan.mode == Mode::kConstant) {
      return absl::InvalidArgumentError(
          absl::StrCat("pad3d: mode '", mode, "' is not constant, reflect, replicate or circular"));
    }
    for (int d = 0; d < 3; ++d) plan.before[4 - d] = p[2 * d], after[4 - d] = p[2 * d + 1];  // W, H, D
  }
  for (int d = 0; d < x.size(); ++d) {
    if (plan.before[d] < 0 || after[d] < 0) return absl::InvalidArgumentError(absl::StrCat(type, ": negative padding"));
    if (plan.mode == Mode::kReflect && (plan.before[d] >= x[d] || after[d] >= x[d]) && plan.before[d] + after[d] > 0) {
      return absl::InvalidArgumentError(absl::StrCat(type, ": reflect padding of dimension ", d,
                                                     " must be smaller than X", x.ToString(), "'s size there"));
    }
    plan.out[d] = x[d] + plan.before[d] + after[d];
  }
  return plan;
}

// The input position output cell `o` reads, or -1 for the constant.
int64_t Source(const PadPlan& plan, int64_t o) {
  int64_t src = 0, stride = 1;
  for (int d = plan.out.size() - 1; d >= 0; --d) {
    const int64_t n = plan.in[d];
    int64_t i = o % plan.out[d] - plan.before[static_cast<size_t>(d)];
    o /= plan.out[d];
    if (i < 0 || i >= n) {
      switch (plan.mode) {
        case Mode::kConstant:
          return -1;
        case Mode::kReflect:
          i = i < 0 ? -i : 2 * (n - 1) - i;
          break;
        case Mode::kReplicate:
          i = std::clamp<int64_t>(i, 0, n - 1);
          break;
        case Mode::kCircular:
          i = ((i % n) + n) % n;
          break;
      }
    }
    src += i * stride;
    stride *= n;
  }
  return src;
}

template <typename T>
absl::Status PadKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const PadPlan plan, Plan(ctx, x->dims()));
  const T value = static_cast<T>(ctx.Attr<float>(absl::StartsWith(ctx.op().type, "pad3d") ? "value" : "pad_value"));
  const T* xp = x->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(plan.out);
  for (int64_t i = 0, n = plan.out.numel(); i < n; ++i) {
    const int64_t s = Source(plan, i);
    o[i] = s < 0 ? value : xp[s];
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status PadGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  // X's shape: from X where the grad op has it (pad3d), else Out@GRAD's
  // minus the paddings (pad).
  DDim xd = g->dims();
  if (const Tensor* x = ctx.Input("X")) {
    xd = x->dims();
  } else {
    const std::vector<int32_t> p = ctx.Attr<std::vector<int32_t>>("paddings");
    for (int d = 0; d < xd.size() && 2 * d + 1 < static_cast<int>(p.size()); ++d) xd[d] -= p[2 * d] + p[2 * d + 1];
  }
  OAR_ASSIGN_OR_RETURN(const PadPlan plan, Plan(ctx, xd));
  if (plan.out != g->dims()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": Out@GRAD", g->dims().ToString(), " is not X", xd.ToString(), " padded"));
  }
  const T* gp = g->data<T>();
  T* d = dx->mutable_data<T>(xd);
  std::fill(d, d + dx->numel(), T(0));
  for (int64_t i = 0, n = plan.out.numel(); i < n; ++i) {
    const int64_t s = Source(plan, i);
    if (s >= 0) d[s] += gp[i];
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterPadOps(OpRegistry* r) {
  r->Register("pad")
      .Input("X")
      .Output("Out")
      .Attr("paddings", std::vector<int32_t>{})
      .Attr("pad_value", 0.0f)
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({}, {}, {"Out"}, {"X"}))
      .Kernel<float>(PadKernel<float>)
      .Kernel<double>(PadKernel<double>);
  r->Register("pad_grad")
      .Input("X", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("paddings", std::vector<int32_t>{})
      .Attr("pad_value", 0.0f)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(PadGradKernel<float>)
      .Kernel<double>(PadGradKernel<double>);
  auto pad3d = [](OpInfo& i) -> OpInfo& {
    return i.Attr("paddings", std::vector<int32_t>(6, 0))
        .Attr("mode", std::string("constant"))
        .Attr("value", 0.0f)
        .Attr("data_format", std::string("NCDHW"))
        .Implements("data_format", {std::string("NCDHW")});
  };
  pad3d(r->Register("pad3d").Input("X").Input("Paddings", kUnimplemented).Output("Out"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
      .Kernel<float>(PadKernel<float>)
      .Kernel<double>(PadKernel<double>);
  pad3d(r->Register("pad3d_grad")
            .Input("X")
            .Input("Paddings", kUnimplemented)
            .Input(GradVarName("Out"))
            .Output(GradVarName("X"), kDispensable))
      .SetInferShape(NoShapeInference)
      .Kernel<float>(PadGradKernel<float>)
      .Kernel<double>(PadGradKernel<double>);
}

}  // namespace oar
