// GPU kernels of the update ops beyond sgd, momentum and adam (those are
// in nn_ops_cuda.cc): adagrad, decayed_adagrad, adamax, rmsprop (plain and
// centered), ftrl and lars_momentum. A sparse gradient is summed into a dense buffer
// first (GpuOptimizerGrad): for these ops a row without gradient gets
// the update of a zero gradient, which is what the CPU kernels compute
// (adagrad's rows-only update leaves such a row unchanged either way).
#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"

namespace oar {
namespace {

// What every update op reads: its GPU, Param, the dense gradient.
struct Update {
  CudaContext* c = nullptr;
  const Tensor* param = nullptr;
  const float* p = nullptr;
  const float* g = nullptr;
  const float* lr = nullptr;
  int64_t n = 0;
  Tensor dense;  // a sparse gradient summed
};

absl::Status Begin(const ExecutionContext& ctx, Update* u) {
  OAR_ASSIGN_OR_RETURN(u->c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(u->param, RequireInput(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(u->p, GpuIn<float>(ctx, "Param"));
  OAR_ASSIGN_OR_RETURN(u->g, GpuOptimizerGrad(ctx, *u->param, &u->dense));
  OAR_ASSIGN_OR_RETURN(u->lr, GpuIn<float>(ctx, "LearningRate"));
  u->n = u->param->numel();
  return absl::OkStatus();
}

// An input the update reads element by element: Param's size, on the GPU.
absl::StatusOr<const float*> LikeParam(const ExecutionContext& ctx, const Update& u, const std::string& slot) {
  OAR_ASSIGN_OR_RETURN(const float* v, GpuIn<float>(ctx, slot));
  if (ctx.Input(slot)->numel() != u.n) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", slot, " has ", ctx.Input(slot)->numel(),
                                                   " elements, Param ", u.n));
  }
  return v;
}

template <bool kDecayed>
absl::Status AdagradKernel(const ExecutionContext& ctx) {
  Update u;
  OAR_RETURN_IF_ERROR(Begin(ctx, &u));
  OAR_ASSIGN_OR_RETURN(const float* mom, LikeParam(ctx, u, "Moment"));
  cuda::Adagrad<float>(u.p, u.g, mom, u.lr, kDecayed ? ctx.Attr<float>("decay") : 0.0f, kDecayed,
                       ctx.Attr<float>("epsilon"), GpuOut<float>(ctx, "ParamOut"), GpuOut<float>(ctx, "MomentOut"), u.n,
                       u.c->stream);
  return LaunchStatus(ctx);
}

absl::Status AdamaxKernel(const ExecutionContext& ctx) {
  Update u;
  OAR_RETURN_IF_ERROR(Begin(ctx, &u));
  OAR_ASSIGN_OR_RETURN(const float* mom, LikeParam(ctx, u, "Moment"));
  OAR_ASSIGN_OR_RETURN(const float* inf, LikeParam(ctx, u, "InfNorm"));
  OAR_ASSIGN_OR_RETURN(const float* b1p, GpuIn<float>(ctx, "Beta1Pow"));
  cuda::Adamax<float>(u.p, u.g, u.lr, mom, inf, b1p, ctx.Attr<float>("beta1"), ctx.Attr<float>("beta2"),
                      ctx.Attr<float>("epsilon"), GpuOut<float>(ctx, "ParamOut"), GpuOut<float>(ctx, "MomentOut"),
                      GpuOut<float>(ctx, "InfNormOut"), u.n, u.c->stream);
  return LaunchStatus(ctx);
}

absl::Status RmspropKernel(const ExecutionContext& ctx) {
  Update u;
  OAR_RETURN_IF_ERROR(Begin(ctx, &u));
  OAR_ASSIGN_OR_RETURN(const float* ms, LikeParam(ctx, u, "MeanSquare"));
  OAR_ASSIGN_OR_RETURN(const float* mom, LikeParam(ctx, u, "Moment"));
  const float* mg = nullptr;
  float* mgout = nullptr;
  if (ctx.Attr<bool>("centered")) {
    OAR_ASSIGN_OR_RETURN(mg, LikeParam(ctx, u, "MeanGrad"));
    mgout = GpuOut<float>(ctx, "MeanGradOut");
    if (mgout == nullptr) {
      return absl::InvalidArgumentError("rmsprop: centered=true needs MeanGradOut (the updated MeanGrad)");
    }
  }
  cuda::Rmsprop<float>(u.p, u.g, ms, mom, mg, u.lr, ctx.Attr<float>("decay"), ctx.Attr<float>("epsilon"),
                       ctx.Attr<float>("momentum"), GpuOut<float>(ctx, "ParamOut"), GpuOut<float>(ctx, "MeanSquareOut"),
                       GpuOut<float>(ctx, "MomentOut"), mgout, u.n, u.c->stream);
  return LaunchStatus(ctx);
}

absl::Status FtrlKernel(const ExecutionContext& ctx) {
  Update u;
  OAR_RETURN_IF_ERROR(Begin(ctx, &u));
  OAR_ASSIGN_OR_RETURN(const float* sq, LikeParam(ctx, u, "SquaredAccumulator"));
  OAR_ASSIGN_OR_RETURN(const float* lin, LikeParam(ctx, u, "LinearAccumulator"));
  cuda::Ftrl<float>(u.p, u.g, sq, lin, u.lr, ctx.Attr<float>("l1"), ctx.Attr<float>("l2"), ctx.Attr<float>("lr_power"),
                    GpuOut<float>(ctx, "ParamOut"), GpuOut<float>(ctx, "SquaredAccumOut"),
                    GpuOut<float>(ctx, "LinearAccumOut"), u.n, u.c->stream);
  return LaunchStatus(ctx);
}

absl::Status LarsMomentumKernel(const ExecutionContext& ctx) {
  Update u;
  OAR_RETURN_IF_ERROR(Begin(ctx, &u));
  OAR_ASSIGN_OR_RETURN(const float* v, LikeParam(ctx, u, "Velocity"));
  Tensor norms;
  norms.Resize(DDim{2});
  cuda::LarsMomentum<float>(u.p, u.g, v, u.lr, ctx.Attr<float>("mu"), ctx.Attr<float>("lars_coeff"),
                            ctx.Attr<float>("lars_weight_decay"), norms.mutable_data<float>(ctx.place()),
                            GpuOut<float>(ctx, "ParamOut"), GpuOut<float>(ctx, "VelocityOut"), u.n, u.c->stream);
  return LaunchStatus(ctx);
}

}  // namespace

void RegisterCudaOptimizerKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend("adagrad").Kernel<float>(AdagradKernel<false>, gpu);
  r->Extend("decayed_adagrad").Kernel<float>(AdagradKernel<true>, gpu);
  r->Extend("adamax").Kernel<float>(AdamaxKernel, gpu);
  r->Extend("rmsprop").Kernel<float>(RmspropKernel, gpu);
  r->Extend("ftrl").Kernel<float>(FtrlKernel, gpu);
  r->Extend("lars_momentum").Kernel<float>(LarsMomentumKernel, gpu);
}

}  // namespace oar
