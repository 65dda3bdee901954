// GPU kernels of fused_elemwise_activation and its gradient, the ops the
// fuse_elewise_add_act pass makes (functor_list [act, "elementwise_add"],
// act relu, sigmoid or tanh; Fluid's broadcast of Y at `axis`), as the CPU
// kernels (fused_ops.cc): the forward is one pass over memory; the gradient
// is act's derivative from Out in one pass, then Y's share summed over the
// broadcast dimensions.
#include <cstdint>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"
#include "common/ops/elementwise_layout.h"
#include "common/ops/fused_elemwise.h"

namespace oar {
namespace {

cuda::Activation DeviceActivation(FusedAct a) {
  switch (a) {
    case FusedAct::kRelu:
      return cuda::Activation::kRelu;
    case FusedAct::kSigmoid:
      return cuda::Activation::kSigmoid;
    case FusedAct::kTanh:
      return cuda::Activation::kTanh;
  }
  return cuda::Activation::kRelu;
}

absl::Status FusedKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const FusedAct act, ParseFusedFunctors(ctx.op(), ""));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* y, GpuIn<float>(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(Bcast b, ElementwiseLayout(ctx.op().type, ctx.Input("X")->dims(), ctx.Input("Y")->dims(),
                                                  ctx.Attr<int32_t>("axis")));
  cuda::FusedAddActivation<float>(DeviceActivation(act), x, y, GpuOut<float>(ctx, "Out"),
                                  GpuOut<float>(ctx, "IntermediateOut"), b.pre, b.n, b.post, c->stream);
  return LaunchStatus(ctx);
}

absl::Status FusedGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const FusedAct act, ParseFusedFunctors(ctx.op(), "_grad"));
  OAR_ASSIGN_OR_RETURN(const float* out, GpuIn<float>(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const float* dout, GpuIn<float>(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInput(ctx, "Y").status());
  const DDim od = ctx.Input("Out")->dims();
  if (od != ctx.Input(GradVarName("Out"))->dims()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": Out", od.ToString(), " and Out@GRAD",
                                                   ctx.Input(GradVarName("Out"))->dims().ToString(), " differ"));
  }
  // X has Out's shape: the layout comes from Out and Y.
  OAR_ASSIGN_OR_RETURN(Bcast b,
                       ElementwiseLayout(ctx.op().type, od, ctx.Input("Y")->dims(), ctx.Attr<int32_t>("axis")));
  float* dx = GpuOut<float>(ctx, GradVarName("X"));
  float* dinter = GpuOut<float>(ctx, GradVarName("IntermediateOut"));
  float* dy = GpuOut<float>(ctx, GradVarName("Y"));
  const int64_t total = od.numel();
  // The add's output gradient (= X's = Y's before the reduction) goes to
  // X@GRAD, else IntermediateOut@GRAD, else a buffer of its own.
  Tensor scratch;
  float* dv = dx != nullptr ? dx : dinter;
  if (dv == nullptr) {
    if (dy == nullptr) return absl::OkStatus();
    scratch.Resize(od);
    dv = scratch.mutable_data<float>(ctx.place());
  }
  cuda::ActivationGrad<float>(DeviceActivation(act), out, dout, dv, total, c->stream);
  if (dinter != nullptr && dinter != dv) {
    OAR_RETURN_IF_ERROR(
        CudaStatus(cudaMemcpyAsync(dinter, dv, total * sizeof(float), cudaMemcpyDeviceToDevice, c->stream),
                   ctx.op().type + ": IntermediateOut@GRAD"));
  }
  if (dy != nullptr && dy != dv) {
    if (b.same) {
      OAR_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(dy, dv, total * sizeof(float), cudaMemcpyDeviceToDevice, c->stream),
                     ctx.op().type + ": Y@GRAD"));
    } else {  // summed over the [pre, ., post] dimensions Y was broadcast along, as elementwise_add_grad's
      OAR_ASSIGN_OR_RETURN(const float* y, GpuIn<float>(ctx, "Y"));
      // add's dY is the output gradient itself: X's value is never read (dv stands in).
      cuda::ElementwiseGradY<float>(cuda::Binary::kAdd, dv, y, nullptr, dv, dy, b.pre, b.n, b.post, c->stream);
    }
  }
  return LaunchStatus(ctx);
}

}  // namespace

void RegisterCudaFusedKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend("fused_elemwise_activation").Kernel<float>(FusedKernel, gpu);
  r->Extend("fused_elemwise_activation_grad").Kernel<float>(FusedGradKernel, gpu);
}

}  // namespace oar
