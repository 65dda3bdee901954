// GPU kernels of the small tensor ops a training program runs beside its
// layers: cast (float32, float64, int32, int64, bool in any pair),
// increment (the learning-rate schedules' step counter, kept on the GPU)
// and dropout with its gradient (Fluid's two implementations; the mask
// drawn with the place's cuRAND generator, so it differs from the CPU's
// draw but keeps the same rule: dropped where a uniform in [0, 1) < p).
#include <cstdint>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"

namespace oar {
namespace {

template <typename In>
absl::Status CastKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const In* x, GpuIn<In>(ctx, "X"));
  const Tensor* xt = ctx.Input("X");
  Tensor* out = ctx.Output("Out");
  out->Resize(xt->dims());
  const int64_t n = xt->numel();
  switch (static_cast<DataType>(ctx.Attr<int32_t>("out_dtype"))) {
    case DataType::kFloat32: cuda::Cast<In, float>(x, out->mutable_data<float>(ctx.place()), n, c->stream); break;
    case DataType::kFloat64: cuda::Cast<In, double>(x, out->mutable_data<double>(ctx.place()), n, c->stream); break;
    case DataType::kInt32: cuda::Cast<In, int32_t>(x, out->mutable_data<int32_t>(ctx.place()), n, c->stream); break;
    case DataType::kInt64: cuda::Cast<In, int64_t>(x, out->mutable_data<int64_t>(ctx.place()), n, c->stream); break;
    case DataType::kBool: cuda::Cast<In, bool>(x, out->mutable_data<bool>(ctx.place()), n, c->stream); break;
    default:
      return absl::UnimplementedError(absl::StrCat("cast: out_dtype ", ctx.Attr<int32_t>("out_dtype"),
                                                   " is not supported"));
  }
  out->set_lod(xt->lod());
  return LaunchStatus(ctx);
}

template <typename T>
absl::Status IncrementKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const T* x, GpuIn<T>(ctx, "X"));
  if (ctx.Input("X")->numel() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("increment: X", ctx.Input("X")->dims().ToString(),
                                                   " must hold one value"));
  }
  Tensor* out = ctx.Output("Out");
  out->Resize(DDim{1});
  cuda::Increment<T>(x, out->mutable_data<T>(ctx.place()), static_cast<T>(ctx.Attr<float>("step")), c->stream);
  return LaunchStatus(ctx);
}

bool Upscale(const ExecutionContext& ctx) {
  return ctx.Attr<std::string>("dropout_implementation") == "upscale_in_train";
}

absl::Status DropoutKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  const Tensor* xt = ctx.Input("X");
  const int64_t n = xt->numel();
  const float p = ctx.Attr<float>("dropout_prob");
  float* y = GpuOut<float>(ctx, "Out");
  Tensor* mask_t = ctx.Output("Mask");
  if (ctx.Attr<bool>("is_test")) {
    cuda::Scale<float>(x, y, n, Upscale(ctx) ? 1.f : 1.f - p, 0.f, true, c->stream);
    if (mask_t != nullptr) {  // ones, for a dropout_grad behind an is_test dropout (as on the CPU)
      mask_t->Resize(xt->dims());
      cuda::Fill<float>(mask_t->mutable_data<float>(ctx.place()), n, 1.f, c->stream);
    }
    return LaunchStatus(ctx);
  }
  Tensor scratch;
  if (mask_t == nullptr) mask_t = &scratch;
  mask_t->Resize(xt->dims());
  float* mask = mask_t->mutable_data<float>(ctx.place());
  if (ctx.Attr<bool>("fix_seed")) {
    const uint64_t seed = static_cast<uint64_t>(ctx.Attr<int32_t>("seed"));
    OAR_RETURN_IF_ERROR(CurandStatus(curandSetPseudoRandomGeneratorSeed(c->curand, seed), "dropout: seed"));
    OAR_RETURN_IF_ERROR(CurandStatus(curandSetGeneratorOffset(c->curand, 0), "dropout: offset"));
  }
  if (n > 0) OAR_RETURN_IF_ERROR(CurandStatus(curandGenerateUniform(c->curand, mask, n), "dropout: mask"));
  const float keep_scale = Upscale(ctx) && p < 1.f ? 1.f / (1.f - p) : 1.f;
  cuda::DropoutMask<float>(x, mask, y, n, p, keep_scale, c->stream);
  return LaunchStatus(ctx);
}

absl::Status DropoutGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* g, GpuIn<float>(ctx, GradVarName("Out")));
  float* dx = GpuOut<float>(ctx, GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const int64_t n = ctx.Input(GradVarName("Out"))->numel();
  const float p = ctx.Attr<float>("dropout_prob");
  if (ctx.Attr<bool>("is_test")) {  // the forward scaled by a constant
    cuda::Scale<float>(g, dx, n, Upscale(ctx) ? 1.f : 1.f - p, 0.f, true, c->stream);
    return LaunchStatus(ctx);
  }
  OAR_ASSIGN_OR_RETURN(const float* mask, GpuIn<float>(ctx, "Mask"));
  cuda::MaskedScale<float>(g, mask, Upscale(ctx) && p < 1.f ? 1.f / (1.f - p) : 1.f, dx, n, c->stream);
  return LaunchStatus(ctx);
}

}  // namespace

void RegisterCudaTensorKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend("cast")
      .Kernel<float>(CastKernel<float>, gpu)
      .Kernel<double>(CastKernel<double>, gpu)
      .Kernel<int32_t>(CastKernel<int32_t>, gpu)
      .Kernel<int64_t>(CastKernel<int64_t>, gpu)
      .Kernel<bool>(CastKernel<bool>, gpu);
  r->Extend("increment")
      .Kernel<float>(IncrementKernel<float>, gpu)
      .Kernel<double>(IncrementKernel<double>, gpu)
      .Kernel<int32_t>(IncrementKernel<int32_t>, gpu)
      .Kernel<int64_t>(IncrementKernel<int64_t>, gpu);
  r->Extend("dropout").Kernel<float>(DropoutKernel, gpu);
  r->Extend("dropout_grad").Kernel<float>(DropoutGradKernel, gpu);
}

}  // namespace oar
