// GPU kernels of the small tensor ops a training program runs beside its
// layers: cast (float32, float64, int32, int64, bool in any pair),
// increment (the learning-rate schedules' step counter, kept on the GPU),
// dropout with its gradient (Fluid's two implementations; the mask drawn
// with the place's cuRAND generator, so it differs from the CPU's draw but
// keeps the same rule: dropped where a uniform in [0, 1) < p), and
// transpose2 with its gradient.
#include <cstdint>
#include <vector>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"

namespace oar {
namespace {

template <typename In>
absl::Status CastKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const In* x, GpuIn<In>(ctx, "X"));
  const Tensor* xt = ctx.Input("X");
  // Out bound to X: a narrower type would overwrite elements other threads
  // have yet to read, and a wider one would free X's buffer (in stream
  // order, before the kernel) when Out grows; so the result goes to a buffer
  // of its own, which then replaces Out's after the launch.
  const bool in_place = ctx.OutputVar("Out") == ctx.InputVar("X");
  Tensor fresh;
  Tensor* out = in_place ? &fresh : ctx.Output("Out");
  out->Resize(xt->dims());
  const int64_t n = xt->numel();
  switch (static_cast<DataType>(ctx.Attr<int32_t>("out_dtype"))) {
    case DataType::kFloat32:
      cuda::Cast<In, float>(x, out->mutable_data<float>(ctx.place()), n, c->stream);
      break;
    case DataType::kFloat64:
      cuda::Cast<In, double>(x, out->mutable_data<double>(ctx.place()), n, c->stream);
      break;
    case DataType::kInt32:
      cuda::Cast<In, int32_t>(x, out->mutable_data<int32_t>(ctx.place()), n, c->stream);
      break;
    case DataType::kInt64:
      cuda::Cast<In, int64_t>(x, out->mutable_data<int64_t>(ctx.place()), n, c->stream);
      break;
    case DataType::kBool:
      cuda::Cast<In, bool>(x, out->mutable_data<bool>(ctx.place()), n, c->stream);
      break;
    default:
      return absl::UnimplementedError(
          absl::StrCat("cast: out_dtype ", ctx.Attr<int32_t>("out_dtype"), " is not supported"));
  }
  out->set_lod(xt->lod());
  if (in_place) ctx.Output("Out")->ShareDataWith(fresh);
  return LaunchStatus(ctx);
}

template <typename T>
absl::Status IncrementKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const T* x, GpuIn<T>(ctx, "X"));
  if (ctx.Input("X")->numel() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("increment: X", ctx.Input("X")->dims().ToString(), " must hold one value"));
  }
  Tensor* out = ctx.Output("Out");
  out->Resize(ctx.Input("X")->dims());  // [1], or [] for a Paddle 2.x 0-D counter
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

// transpose2 and its gradient: `perm` takes X (dims `x`) to the output.
absl::Status PermuteOnGpu(const ExecutionContext& ctx, const Tensor& x, const std::vector<int32_t>& perm, Tensor* out) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  const DDim& d = x.dims();
  if (d.size() > 8 || static_cast<int>(perm.size()) != d.size()) {
    return absl::UnimplementedError(absl::StrCat(ctx.op().type, " on a GPU: X", d.ToString(), " with axis of ",
                                                 perm.size(), " (at most 8 dimensions)"));
  }
  cuda::PermuteLayout l;
  l.rank = d.size();
  std::vector<int64_t> stride(d.size(), 1);
  for (int i = d.size() - 2; i >= 0; --i) stride[i] = stride[i + 1] * d[i + 1];
  for (int i = 0; i < d.size(); ++i) {
    l.out_dims[i] = d[perm[i]];
    l.src_strides[i] = stride[perm[i]];
  }
  if (!(x.place() == ctx.place()) || x.dtype() != DataType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": want float32 on ", ctx.place().ToString()));
  }
  cuda::Permute<float>(x.data<float>(), l, out->mutable_data<float>(ctx.place()), x.numel(), c->stream);
  return LaunchStatus(ctx);
}

absl::Status TransposeKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  if (Tensor* xs = ctx.Output("XShape")) xs->mutable_data<float>();  // a shape only, on the host as on the CPU
  return PermuteOnGpu(ctx, *x, ctx.Attr<std::vector<int32_t>>("axis"), ctx.Output("Out"));
}

absl::Status TransposeGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const std::vector<int32_t> axis = ctx.Attr<std::vector<int32_t>>("axis");
  std::vector<int32_t> inverse(axis.size());
  for (size_t i = 0; i < axis.size(); ++i) {
    if (axis[i] < 0 || axis[i] >= static_cast<int32_t>(axis.size())) {
      return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": axis ", axis[i], " out of range"));
    }
    inverse[static_cast<size_t>(axis[i])] = static_cast<int32_t>(i);
  }
  return PermuteOnGpu(ctx, *g, inverse, dx);
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
  r->Extend("transpose2").Kernel<float>(TransposeKernel, gpu);
  r->Extend("transpose2_grad").Kernel<float>(TransposeGradKernel, gpu);
}

}  // namespace oar
