// GPU kernels of the update ops: sgd, momentum, adam (lazy_mode too),
// adagrad, decayed_adagrad, adamax, rmsprop (plain and centered), ftrl and
// lars_momentum, with the learning rate and beta powers read on the
// device. From a sparse gradient, sgd, adagrad and lazy adam move only its
// rows (merged on the GPU: GpuMergedSparseGrad), as the CPU kernels do, and
// adam follows the CPU kernel's sparse rules (AdamKernel); the
// others sum it into a dense buffer first (GpuOptimizerGrad), so a row
// without gradient gets the update of a zero gradient, which is what their
// CPU kernels compute.
#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"

namespace oar {
namespace {

bool SparseGrad(const ExecutionContext& ctx) {
  const Variable* g = ctx.InputVar("Grad");
  return g != nullptr && g->IsType<SelectedRows>();
}

// Out starts as a copy of In unless the op updates in place.
absl::Status CopyUnlessInPlace(const ExecutionContext& ctx, CudaContext* c, const float* in, float* out, int64_t n) {
  if (in == out || n == 0) return absl::OkStatus();
  return CudaStatus(
      cudaMemcpyAsync(out, in, sizeof(float) * static_cast<size_t>(n), cudaMemcpyDeviceToDevice, c->stream),
      ctx.op().type);
}

absl::Status SgdKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* p, GpuIn<float>(ctx, "Param"));
  const int64_t n = ctx.Input("Param")->numel();
  if (SparseGrad(ctx)) {  // only the gradient's rows move, as on the CPU
    OAR_ASSIGN_OR_RETURN(GpuMergedGrad g, GpuMergedSparseGrad(ctx, *ctx.Input("Param")));
    OAR_ASSIGN_OR_RETURN(const float* lr, GpuIn<float>(ctx, "LearningRate"));
    float* pout = GpuOut<float>(ctx, "ParamOut");
    OAR_RETURN_IF_ERROR(CopyUnlessInPlace(ctx, c, p, pout, n));
    if (g.count > 0) {
      cuda::SgdRows<float>(g.rows.data<int64_t>(), g.count, g.width, g.values.data<float>(), lr, pout, c->stream);
    }
    return LaunchStatus(ctx);
  }
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
  const float decay =
      ctx.Attr<std::string>("regularization_method") == "l2_decay" ? ctx.Attr<float>("regularization_coeff") : 0.f;
  cuda::Momentum<float>(p, g, v, lr, ctx.Attr<float>("mu"), ctx.Attr<bool>("use_nesterov"),
                        ctx.Attr<float>("rescale_grad"), decay, GpuOut<float>(ctx, "ParamOut"),
                        GpuOut<float>(ctx, "VelocityOut"), n, c->stream);
  return LaunchStatus(ctx);
}

// adam from a dense gradient, or from a sparse one as the CPU kernel (and
// Paddle's) computes it: no rows, no step and the powers kept; powers bound
// in place, the step reads them already advanced; not lazy, the rows
// without gradient step by their decayed moments with ε unscaled.
absl::Status AdamKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* p, GpuIn<float>(ctx, "Param"));
  const Tensor& param = *ctx.Input("Param");
  const int64_t n = param.numel();
  // The gradient first, as on the CPU: a bad one is an error before any
  // output buffer is taken (an in-place output over a shared buffer would
  // get a fresh one and lose the parameter).
  const bool sparse = SparseGrad(ctx);
  GpuMergedGrad merged;
  Tensor dense;
  const float* g = nullptr;
  if (sparse) {
    OAR_ASSIGN_OR_RETURN(merged, GpuMergedSparseGrad(ctx, param));
  } else {
    OAR_ASSIGN_OR_RETURN(g, GpuOptimizerGrad(ctx, param, &dense));
  }
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
  if (!sparse) {
    cuda::Adam<float>(p, g, lr, m1, m2, b1p, b2p, b1, b2, eps, pout, m1out, m2out, b1p_out, b2p_out, n, c->stream);
    return LaunchStatus(ctx);
  }
  // The outputs start as the inputs; only what the step reaches moves.
  OAR_RETURN_IF_ERROR(CopyUnlessInPlace(ctx, c, p, pout, n));
  OAR_RETURN_IF_ERROR(CopyUnlessInPlace(ctx, c, m1, m1out, n));
  OAR_RETURN_IF_ERROR(CopyUnlessInPlace(ctx, c, m2, m2out, n));
  if (merged.count == 0) {
    if (b1p_out != nullptr) OAR_RETURN_IF_ERROR(CopyUnlessInPlace(ctx, c, b1p, b1p_out, 1));
    if (b2p_out != nullptr) OAR_RETURN_IF_ERROR(CopyUnlessInPlace(ctx, c, b2p, b2p_out, 1));
    return LaunchStatus(ctx);
  }
  const bool advanced = ctx.InputVar("Beta1Pow") == ctx.OutputVar("Beta1PowOut") &&
                        ctx.InputVar("Beta2Pow") == ctx.OutputVar("Beta2PowOut");
  if (!ctx.Attr<bool>("lazy_mode")) {
    Tensor mask;
    mask.Resize(DDim{param.dims()[0]});
    cuda::AdamRowsWithoutGrad<float>(merged.rows.data<int64_t>(), merged.count, param.dims()[0], merged.width, lr, b1p,
                                     b2p, b1, b2, eps, advanced, mask.mutable_data<uint8_t>(ctx.place()), pout, m1out,
                                     m2out, c->stream);
  }
  cuda::AdamRows<float>(merged.rows.data<int64_t>(), merged.count, merged.width, merged.values.data<float>(), lr, b1p,
                        b2p, b1, b2, eps, advanced, pout, m1out, m2out, c->stream);
  // The powers only (no elements; g unused), after the rows read them.
  cuda::Adam<float>(p, nullptr, lr, m1, m2, b1p, b2p, b1, b2, eps, pout, m1out, m2out, b1p_out, b2p_out, 0, c->stream);
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
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": ", slot, " has ", ctx.Input(slot)->numel(), " elements, Param ", u.n));
  }
  return v;
}

template <bool kDecayed>
absl::Status AdagradKernel(const ExecutionContext& ctx) {
  if (!kDecayed && SparseGrad(ctx)) {  // only the gradient's rows move, as on the CPU
    OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
    OAR_ASSIGN_OR_RETURN(const Tensor* param, RequireInput(ctx, "Param"));
    OAR_ASSIGN_OR_RETURN(const float* p, GpuIn<float>(ctx, "Param"));
    OAR_ASSIGN_OR_RETURN(const float* mom, GpuIn<float>(ctx, "Moment"));
    OAR_ASSIGN_OR_RETURN(const float* lr, GpuIn<float>(ctx, "LearningRate"));
    if (ctx.Input("Moment")->numel() != param->numel()) {
      return absl::InvalidArgumentError(
          absl::StrCat("adagrad: Moment has ", ctx.Input("Moment")->numel(), " elements, Param ", param->numel()));
    }
    OAR_ASSIGN_OR_RETURN(GpuMergedGrad g, GpuMergedSparseGrad(ctx, *param));
    float* pout = GpuOut<float>(ctx, "ParamOut");
    float* mout = GpuOut<float>(ctx, "MomentOut");
    OAR_RETURN_IF_ERROR(CopyUnlessInPlace(ctx, c, p, pout, param->numel()));
    OAR_RETURN_IF_ERROR(CopyUnlessInPlace(ctx, c, mom, mout, param->numel()));
    if (g.count > 0) {
      cuda::AdagradRows<float>(g.rows.data<int64_t>(), g.count, g.width, g.values.data<float>(), lr,
                               ctx.Attr<float>("epsilon"), pout, mout, c->stream);
    }
    return LaunchStatus(ctx);
  }
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
