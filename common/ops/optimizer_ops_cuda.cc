// GPU kernels of the update ops: sgd, momentum, adam (lazy_mode too),
// adagrad, decayed_adagrad, adamax, rmsprop (plain and centered), ftrl and
// lars_momentum, with the learning rate and beta powers read on the
// device. A sparse gradient is summed into a dense buffer first
// (GpuOptimizerGrad): a row without gradient gets the update of a zero
// gradient, which is what the CPU kernels compute (sgd's and adagrad's
// rows-only updates leave such a row unchanged either way); lazy adam moves
// only the gradient's rows.
#include <utility>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"

namespace oar {
namespace {

absl::Status SgdKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* p, GpuIn<float>(ctx, "Param"));
  const int64_t n = ctx.Input("Param")->numel();
  Tensor dense;
  OAR_ASSIGN_OR_RETURN(const float* g, GpuOptimizerGrad(ctx, *ctx.Input("Param"), &dense));
  OAR_ASSIGN_OR_RETURN(const float* lr, GpuIn<float>(ctx, "LearningRate"));
  cuda::Sgd<float>(p, g, lr, GpuOut<float>(ctx, "ParamOut"), n, c->stream);
  return LaunchStatus(ctx);
}

absl::Status MomentumKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* p, GpuIn<float>(ctx, "Param"));
  const int64_t n = ctx.Input("Param")->numel();
  Tensor dense;
  OAR_ASSIGN_OR_RETURN(const float* g, GpuOptimizerGrad(ctx, *ctx.Input("Param"), &dense));
  OAR_ASSIGN_OR_RETURN(const float* v, GpuIn<float>(ctx, "Velocity"));
  OAR_ASSIGN_OR_RETURN(const float* lr, GpuIn<float>(ctx, "LearningRate"));
  const float decay = ctx.Attr<std::string>("regularization_method") == "l2_decay"
                          ? ctx.Attr<float>("regularization_coeff") : 0.f;
  cuda::Momentum<float>(p, g, v, lr, ctx.Attr<float>("mu"), ctx.Attr<bool>("use_nesterov"),
                        ctx.Attr<float>("rescale_grad"), decay, GpuOut<float>(ctx, "ParamOut"),
                        GpuOut<float>(ctx, "VelocityOut"), n, c->stream);
  return LaunchStatus(ctx);
}

absl::Status AdamKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* p, GpuIn<float>(ctx, "Param"));
  const int64_t n = ctx.Input("Param")->numel();
  Tensor dense;
  OAR_ASSIGN_OR_RETURN(const float* g, GpuOptimizerGrad(ctx, *ctx.Input("Param"), &dense));
  OAR_ASSIGN_OR_RETURN(const float* lr, GpuIn<float>(ctx, "LearningRate"));
  OAR_ASSIGN_OR_RETURN(const float* m1, GpuIn<float>(ctx, "Moment1"));
  OAR_ASSIGN_OR_RETURN(const float* m2, GpuIn<float>(ctx, "Moment2"));
  OAR_ASSIGN_OR_RETURN(const float* b1p, GpuIn<float>(ctx, "Beta1Pow"));
  OAR_ASSIGN_OR_RETURN(const float* b2p, GpuIn<float>(ctx, "Beta2Pow"));
  float* b1p_out = nullptr;
  float* b2p_out = nullptr;
  if (Tensor* t = ctx.Output("Beta1PowOut")) {
    t->Resize(DDim{1});
    b1p_out = t->mutable_data<float>(ctx.place());
  }
  if (Tensor* t = ctx.Output("Beta2PowOut")) {
    t->Resize(DDim{1});
    b2p_out = t->mutable_data<float>(ctx.place());
  }
  const float b1 = ctx.Attr<float>("beta1"), b2 = ctx.Attr<float>("beta2"), eps = ctx.Attr<float>("epsilon");
  float* pout = GpuOut<float>(ctx, "ParamOut");
  float* m1out = GpuOut<float>(ctx, "Moment1Out");
  float* m2out = GpuOut<float>(ctx, "Moment2Out");
  const Variable* grad = ctx.InputVar("Grad");
  if (ctx.Attr<bool>("lazy_mode") && grad != nullptr && grad->IsType<SelectedRows>()) {
    // Lazy: only the gradient's rows move; the others keep their values.
    OAR_ASSIGN_OR_RETURN(Tensor rows, GpuSparseGradRows(ctx));
    const size_t bytes = sizeof(float) * static_cast<size_t>(n);
    for (auto [from, to] : {std::pair{p, pout}, std::pair{m1, m1out}, std::pair{m2, m2out}}) {
      if (from != to) {
        OAR_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, c->stream), "adam"));
      }
    }
    const int64_t height = ctx.Input("Param")->dims()[0];
    cuda::AdamRows<float>(rows.data<int64_t>(), rows.numel(), height > 0 ? n / height : 0, g, lr, b1p, b2p, b1, b2,
                          eps, pout, m1out, m2out, c->stream);
    // The powers only (no elements), after the rows read them.
    cuda::Adam<float>(p, g, lr, m1, m2, b1p, b2p, b1, b2, eps, pout, m1out, m2out, b1p_out, b2p_out, 0, c->stream);
    return LaunchStatus(ctx);
  }
  cuda::Adam<float>(p, g, lr, m1, m2, b1p, b2p, b1, b2, eps, pout, m1out, m2out, b1p_out, b2p_out, n, c->stream);
  return LaunchStatus(ctx);
}

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
  r->Extend("sgd").Kernel<float>(SgdKernel, gpu);
  r->Extend("momentum").Kernel<float>(MomentumKernel, gpu);
  r->Extend("adam").Kernel<float>(AdamKernel, gpu);
  r->Extend("adagrad").Kernel<float>(AdagradKernel<false>, gpu);
  r->Extend("decayed_adagrad").Kernel<float>(AdagradKernel<true>, gpu);
  r->Extend("adamax").Kernel<float>(AdamaxKernel, gpu);
  r->Extend("rmsprop").Kernel<float>(RmspropKernel, gpu);
  r->Extend("ftrl").Kernel<float>(FtrlKernel, gpu);
  r->Extend("lars_momentum").Kernel<float>(LarsMomentumKernel, gpu);
}

}  // namespace oar
