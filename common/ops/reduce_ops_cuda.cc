// GPU kernels of reduce_sum and reduce_mean (over `dim`, every axis with
// reduce_all or no dim named, keep_dim or not) and of their gradients, and
// of clip, clip_grad and clip_by_norm. A reduction over every axis is one
// block-wide sum; any other set of axes adds each output's elements in the
// CPU kernel's order.
#include <cstdint>
#include <vector>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"

namespace oar {
namespace {

struct Plan {
  cuda::ReduceLayout layout;
  bool all = true;  // every axis folded
};

absl::StatusOr<Plan> PlanOf(const ExecutionContext& ctx, const DDim& x) {
  if (x.size() > cuda::kMaxReduceRank) {
    return absl::UnimplementedError(absl::StrCat(ctx.op().type, " on a GPU: X", x.ToString(), " has more than ",
                                                 cuda::kMaxReduceRank, " dimensions"));
  }
  const std::vector<int32_t> dims = ctx.Attr<std::vector<int32_t>>("dim");
  const bool every = ctx.Attr<bool>("reduce_all") || dims.empty();
  Plan p;
  p.layout.rank = x.size();
  for (int i = 0; i < x.size(); ++i) {
    p.layout.dims[i] = x[i];
    p.layout.reduced[i] = every;
  }
  for (int d : dims) {
    const int a = d < 0 ? d + x.size() : d;
    if (a < 0 || a >= x.size()) {
      return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": dim ", d, " out of range for X", x.ToString()));
    }
    p.layout.reduced[a] = true;
  }
  for (int i = 0; i < x.size(); ++i) p.all = p.all && (p.layout.reduced[i] || x[i] == 1);
  return p;
}

template <bool kMean>
absl::Status ReduceKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* xp, GpuIn<float>(ctx, "X"));
  const Tensor* x = ctx.Input("X");
  OAR_ASSIGN_OR_RETURN(Plan plan, PlanOf(ctx, x->dims()));
  Tensor* out = ctx.Output("Out");
  Tensor copy;
  if (out == x) {  // in place (over unit dims): keep X's values apart from Out
    copy.CopyFrom(*x);
    xp = copy.data<float>();
  }
  float* o = GpuOut<float>(ctx, "Out");
  const int64_t n = x->numel();
  const float scale = kMean && n > 0 ? static_cast<float>(out->numel()) / static_cast<float>(n) : 1.0f;
  if (plan.all && out->numel() == 1) {
    cuda::SumAll<float>(xp, n, scale, o, c->stream);
  } else {
    cuda::ReduceAxes<float>(xp, o, plan.layout, out->numel(), scale, c->stream);
  }
  return LaunchStatus(ctx);
}

template <bool kMean>
absl::Status ReduceGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* g, GpuIn<float>(ctx, GradVarName("Out")));
  OAR_ASSIGN_OR_RETURN(Plan plan, PlanOf(ctx, x->dims()));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const int64_t n = x->numel();
  const int64_t out_n = ctx.Input(GradVarName("Out"))->numel();
  const float k = kMean && n > 0 ? static_cast<float>(out_n) / static_cast<float>(n) : 1.0f;
  dx->Resize(x->dims());
  cuda::ReduceAxesGrad<float>(g, dx->mutable_data<float>(ctx.place()), plan.layout, n, k, c->stream);
  return LaunchStatus(ctx);
}

absl::Status ClipKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  cuda::Clip<float>(x, ctx.Attr<float>("min"), ctx.Attr<float>("max"), GpuOut<float>(ctx, "Out"),
                    ctx.Input("X")->numel(), c->stream);
  return LaunchStatus(ctx);
}

absl::Status ClipGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* g, GpuIn<float>(ctx, GradVarName("Out")));
  float* dx = GpuOut<float>(ctx, GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  cuda::ClipGrad<float>(x, g, ctx.Attr<float>("min"), ctx.Attr<float>("max"), dx, ctx.Input("X")->numel(), c->stream);
  return LaunchStatus(ctx);
}

absl::Status ClipByNormKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  Tensor scratch;
  scratch.Resize(DDim{1});
  cuda::ClipByNorm<float>(x, ctx.Attr<float>("max_norm"), scratch.mutable_data<float>(ctx.place()),
                          GpuOut<float>(ctx, "Out"), ctx.Input("X")->numel(), c->stream);
  return LaunchStatus(ctx);
}

}  // namespace

void RegisterCudaReduceKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend("reduce_sum").Kernel<float>(ReduceKernel<false>, gpu);
  r->Extend("reduce_sum_grad").Kernel<float>(ReduceGradKernel<false>, gpu);
  r->Extend("reduce_mean").Kernel<float>(ReduceKernel<true>, gpu);
  r->Extend("reduce_mean_grad").Kernel<float>(ReduceGradKernel<true>, gpu);
  r->Extend("clip").Kernel<float>(ClipKernel, gpu);
  r->Extend("clip_grad").Kernel<float>(ClipGradKernel, gpu);
  r->Extend("clip_by_norm").Kernel<float>(ClipByNormKernel, gpu);
}

}  // namespace oar
