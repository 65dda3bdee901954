// GPU kernels of batch_norm and batch_norm_grad on cuDNN (spatial mode: one
// statistic per channel of an NCHW or NC... input), with Fluid's outputs:
// Y, MeanOut/VarianceOut (running statistics, updated in place with
// factor 1 - momentum), SavedMean and SavedVariance (batch mean and
// inverse std, which the gradient reads).
//
// As in Fluid's GPU kernel, VarianceOut accumulates cuDNN's unbiased batch
// variance (count / (count - 1) times the biased one the CPU kernel uses);
// Y, SavedVariance and every gradient use the biased variance on both.
// is_test or use_global_stats normalises with Mean and Variance instead;
// the gradient under use_global_stats is dY·Scale·inv_std, as on the CPU.
//
// Thread-safety: stateless; a kernel runs on its place's thread.
#include <algorithm>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"
#include "common/ops/cudnn_util.h"

namespace oar {
namespace {

struct BnCall {
  cudnn::TensorDesc x_desc, stat_desc;
  int64_t n = 0, c = 0, hw = 0;
  double eps = 0;
};

absl::Status Prepare(const ExecutionContext& ctx, const DDim& x, BnCall* call) {
  const std::string& type = ctx.op().type;
  if (x.size() < 2 || x.size() > 5) {
    return absl::InvalidArgumentError(absl::StrCat(type, ": X", x.ToString(), " must have rank 2 to 5"));
  }
  if (ctx.Attr<std::string>("data_layout") != "NCHW") {
    return absl::UnimplementedError(
        absl::StrCat(type, ": data_layout '", ctx.Attr<std::string>("data_layout"), "' is not supported (NCHW only)"));
  }
  call->n = x[0];
  call->c = x[1];
  call->hw = x.Product(2, x.size());
  call->eps = std::max<double>(ctx.Attr<float>("epsilon"), CUDNN_BN_MIN_EPSILON);
  OAR_RETURN_IF_ERROR(call->x_desc.Set(type, call->n, call->c, call->hw, 1));
  return call->stat_desc.Set(type, 1, call->c, 1, 1);
}

// `out` = `in` on the device unless they are the same buffer.
absl::Status CopyIfApart(CudaContext* c, const float* in, float* out, int64_t n, const std::string& what) {
  if (in == out) return absl::OkStatus();
  return CudaStatus(cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, c->stream), what);
}

// A [C] output on the GPU, or `scratch` when the op names none (cuDNN
// writes every statistic).
float* StatOut(const ExecutionContext& ctx, const std::string& slot, int64_t c, Tensor* scratch = nullptr) {
  Tensor* t = ctx.Output(slot);
  if (t == nullptr) t = scratch;
  if (t == nullptr) return nullptr;
  t->Resize(DDim{c});
  return t->mutable_data<float>(ctx.place());
}

absl::Status BatchNormKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* scale, GpuIn<float>(ctx, "Scale"));
  OAR_ASSIGN_OR_RETURN(const float* bias, GpuIn<float>(ctx, "Bias"));
  OAR_ASSIGN_OR_RETURN(const float* mean, GpuIn<float>(ctx, "Mean"));
  OAR_ASSIGN_OR_RETURN(const float* var, GpuIn<float>(ctx, "Variance"));
  BnCall call;
  OAR_RETURN_IF_ERROR(Prepare(ctx, ctx.Input("X")->dims(), &call));
  float* y = GpuOut<float>(ctx, "Y");
  const float one = 1.f, zero = 0.f;
  if (ctx.Attr<bool>("is_test") || ctx.Attr<bool>("use_global_stats")) {
    OAR_RETURN_IF_ERROR(CudnnStatus(cudnnBatchNormalizationForwardInference(
                                        c->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, call.x_desc.get(), x,
                                        call.x_desc.get(), y, call.stat_desc.get(), scale, bias, mean, var, call.eps),
                                    "batch_norm: cudnnBatchNormalizationForwardInference"));
    if (float* sm = StatOut(ctx, "SavedMean", call.c)) {
      OAR_RETURN_IF_ERROR(CopyIfApart(c, mean, sm, call.c, "batch_norm: SavedMean"));
    }
    if (float* sv = StatOut(ctx, "SavedVariance", call.c)) {
      cuda::InvStd<float>(var, static_cast<float>(call.eps), sv, call.c, c->stream);
    }
    return LaunchStatus(ctx);
  }
  // cuDNN updates the running statistics in place: start MeanOut and
  // VarianceOut from Mean and Variance (Fluid's programs alias them).
  Tensor mean_scratch, var_scratch, saved_mean_scratch, saved_inv_scratch;
  float* mean_out = StatOut(ctx, "MeanOut", call.c, &mean_scratch);
  float* var_out = StatOut(ctx, "VarianceOut", call.c, &var_scratch);
  OAR_RETURN_IF_ERROR(CopyIfApart(c, mean, mean_out, call.c, "batch_norm: MeanOut"));
  OAR_RETURN_IF_ERROR(CopyIfApart(c, var, var_out, call.c, "batch_norm: VarianceOut"));
  float* saved_mean = StatOut(ctx, "SavedMean", call.c, &saved_mean_scratch);
  float* saved_inv = StatOut(ctx, "SavedVariance", call.c, &saved_inv_scratch);
  return CudnnStatus(cudnnBatchNormalizationForwardTraining(
                         c->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, call.x_desc.get(), x, call.x_desc.get(), y,
                         call.stat_desc.get(), scale, bias, 1.0 - ctx.Attr<float>("momentum"), mean_out, var_out,
                         call.eps, saved_mean, saved_inv),
                     "batch_norm: cudnnBatchNormalizationForwardTraining");
}

absl::Status BatchNormGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* scale, GpuIn<float>(ctx, "Scale"));
  OAR_ASSIGN_OR_RETURN(const float* saved_mean, GpuIn<float>(ctx, "SavedMean"));
  OAR_ASSIGN_OR_RETURN(const float* saved_inv, GpuIn<float>(ctx, "SavedVariance"));
  OAR_ASSIGN_OR_RETURN(const float* dy, GpuIn<float>(ctx, GradVarName("Y")));
  BnCall call;
  OAR_RETURN_IF_ERROR(Prepare(ctx, ctx.Input("X")->dims(), &call));
  const bool global = ctx.Attr<bool>("use_global_stats");
  Tensor dx_scratch, dscale_scratch, dbias_scratch;
  float* dx = GpuOut<float>(ctx, GradVarName("X"));
  float* dx_cudnn = dx;
  if (dx == nullptr || global) {  // under global statistics cuDNN's dX is not the one wanted
    dx_scratch.Resize(ctx.Input("X")->dims());
    dx_cudnn = dx_scratch.mutable_data<float>(ctx.place());
  }
  float* dscale = StatOut(ctx, GradVarName("Scale"), call.c, &dscale_scratch);
  float* dbias = StatOut(ctx, GradVarName("Bias"), call.c, &dbias_scratch);
  const float one = 1.f, zero = 0.f;
  // With the saved statistics given, cuDNN's dScale and dBias are
  // sum(dY·(X − mean)·inv_std) and sum(dY) per channel, in either mode.
  OAR_RETURN_IF_ERROR(CudnnStatus(
      cudnnBatchNormalizationBackward(c->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, call.x_desc.get(), x,
                                      call.x_desc.get(), dy, call.x_desc.get(), dx_cudnn, call.stat_desc.get(), scale,
                                      dscale, dbias, call.eps, saved_mean, saved_inv),
      "batch_norm_grad: cudnnBatchNormalizationBackward"));
  if (global && dx != nullptr) {  // dX = dY · Scale · inv_std, per channel
    Tensor k_t;
    k_t.Resize(DDim{call.c});
    float* k = k_t.mutable_data<float>(ctx.place());
    cuda::ElementwiseForward<float>(cuda::Binary::kMul, scale, saved_inv, k, 1, call.c, 1, c->stream);
    cuda::ElementwiseForward<float>(cuda::Binary::kMul, dy, k, dx, call.n, call.c, call.hw, c->stream);
  }
  return LaunchStatus(ctx);
}

}  // namespace

void RegisterCudaBatchNormKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend("batch_norm").Kernel<float>(BatchNormKernel, gpu);
  r->Extend("batch_norm_grad").Kernel<float>(BatchNormGradKernel, gpu);
}

}  // namespace oar
