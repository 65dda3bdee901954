// GPU kernels of the pointwise ops: elementwise_add/sub/mul/div/pow/max/min
// (Fluid's broadcast, common/ops/elementwise_layout.h; numpy's, where only
// it fits, runs on the host) and their gradients;
// the activations and unary math (relu, sigmoid, tanh, exp, sqrt, square,
// cos, abs, floor, ceil, sign) and their gradients; scale; mean and its
// gradient; sum of dense tensors; fill_constant, uniform_random and
// gaussian_random (cuRAND, seeded by the op's `seed` when it is not 0).
#include <random>

#include "common/framework/place_transfer.h"
#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"
#include "common/ops/elementwise_layout.h"
#include "common/ops/numpy_broadcast.h"

namespace oar {
namespace {

// Fluid's layout of X and Y; where only numpy's broadcast fits them (axis
// -1, X stretching too: [8, 16, 32] + [1, 16, 32]), the CPU kernel takes the
// call (RunOnHostInstead), else the layout's error.
absl::StatusOr<Bcast> GpuLayout(const ExecutionContext& ctx, const DDim& x) {
  const DDim& y = ctx.Input("Y")->dims();
  const int axis = ctx.Attr<int32_t>("axis");
  absl::StatusOr<Bcast> fluid = ElementwiseLayout(ctx.op().type, x, y, axis);
  if (fluid.ok() || axis != -1 || !NumpyBroadcast(ctx.op().type, x, y).ok()) return fluid;
  return RunOnHostInstead(ctx.op(), absl::StrCat("numpy's broadcast of X", x.ToString(), " and Y", y.ToString()));
}

template <cuda::Binary F>
absl::Status ElementwiseKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* y, GpuIn<float>(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(Bcast b, GpuLayout(ctx, ctx.Input("X")->dims()));
  cuda::ElementwiseForward<float>(F, x, y, GpuOut<float>(ctx, "Out"), b.pre, b.n, b.post, c->stream);
  return LaunchStatus(ctx);
}

template <cuda::Binary F>
absl::Status ElementwiseGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  // Fluid 1.3-1.6's add, sub and div grads are not given X (its shape is Out@GRAD's).
  const bool reads_x = F != cuda::Binary::kAdd && F != cuda::Binary::kSub && F != cuda::Binary::kDiv;
  const float* x = nullptr;
  if (reads_x || ctx.InputSize("X") > 0) {
    OAR_ASSIGN_OR_RETURN(x, GpuIn<float>(ctx, "X"));
  }
  OAR_ASSIGN_OR_RETURN(const float* y, GpuIn<float>(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(const float* g, GpuIn<float>(ctx, GradVarName("Out")));
  const float* out = nullptr;
  if (F == cuda::Binary::kDiv) {
    OAR_ASSIGN_OR_RETURN(out, GpuIn<float>(ctx, "Out"));
  }
  const DDim xdims = x != nullptr ? ctx.Input("X")->dims() : ctx.Input(GradVarName("Out"))->dims();
  OAR_ASSIGN_OR_RETURN(Bcast b, GpuLayout(ctx, xdims));
  if (float* dx = GpuOut<float>(ctx, GradVarName("X"))) {
    cuda::ElementwiseGradX<float>(F, x, y, out, g, dx, b.pre, b.n, b.post, c->stream);
  }
  if (float* dy = GpuOut<float>(ctx, GradVarName("Y"))) {
    cuda::ElementwiseGradY<float>(F, x, y, out, g, dy, b.pre, b.n, b.post, c->stream);
  }
  return LaunchStatus(ctx);
}

template <cuda::Activation A>
absl::Status ActivationKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  cuda::ActivationForward<float>(A, x, GpuOut<float>(ctx, "Out"), ctx.Input("X")->numel(), c->stream);
  return LaunchStatus(ctx);
}

// The grad op carries X (square, cos, abs) or Out (the others), as on the
// CPU (activation_ops.cc).
template <cuda::Activation A, bool kUsesX>
absl::Status ActivationGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  const char* src_slot = kUsesX ? "X" : "Out";
  OAR_ASSIGN_OR_RETURN(const float* src, GpuIn<float>(ctx, src_slot));
  OAR_ASSIGN_OR_RETURN(const float* g, GpuIn<float>(ctx, GradVarName("Out")));
  const int64_t n = ctx.Input(src_slot)->numel();
  if (ctx.Input(GradVarName("Out"))->numel() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        ctx.op().type, ": Out@GRAD has ", ctx.Input(GradVarName("Out"))->numel(), " elements, ", src_slot, " ", n));
  }
  if (float* dx = GpuOut<float>(ctx, GradVarName("X"))) cuda::ActivationGrad<float>(A, src, g, dx, n, c->stream);
  return LaunchStatus(ctx);
}

// The gradient of a piecewise-constant op (floor, ceil, sign): zeros shaped
// as Out@GRAD.
absl::Status ZeroGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  if (float* dx = GpuOut<float>(ctx, GradVarName("X"))) cuda::Fill<float>(dx, g->numel(), 0.f, c->stream);
  return LaunchStatus(ctx);
}

// A sparse X (a sparse gradient) keeps its rows and has its values scaled,
// as on the CPU.
template <typename T>
absl::Status ScaleKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  const T a = static_cast<T>(ctx.Attr<float>("scale")), b = static_cast<T>(ctx.Attr<float>("bias"));
  const bool after = ctx.Attr<bool>("bias_after_scale");
  const Variable* xv = ctx.InputVar("X", 0);
  if (xv != nullptr && xv->IsType<SelectedRows>()) {
    const SelectedRows& in = xv->Get<SelectedRows>();
    if (!in.value.initialized()) {  // no rows yet: nothing to scale
      SelectedRows* out = ctx.OutputVar("Out", 0)->GetMutable<SelectedRows>();
      if (out != &in) {
        out->rows = in.rows;
        out->height = in.height;
        out->value = Tensor();
      }
      return absl::OkStatus();
    }
    OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, in.value));
    if (!(in.value.place() == ctx.place())) {
      return absl::InvalidArgumentError(absl::StrCat("scale: input ", InputLabel(ctx.op(), "X"), " is on ",
                                                     in.value.place().ToString(), ", the kernel on ",
                                                     ctx.place().ToString()));
    }
    SelectedRows* out = ctx.OutputVar("Out", 0)->GetMutable<SelectedRows>();
    if (out != &in) {
      out->rows = in.rows;
      out->height = in.height;
      out->value.Resize(in.value.dims());
    }
    const T* x = in.value.data<T>();  // before Out's buffer: in place, that may be a fresh one
    cuda::Scale<T>(x, out->value.mutable_data<T>(ctx.place()), in.value.numel(), a, b, after, c->stream);
    return LaunchStatus(ctx);
  }
  OAR_ASSIGN_OR_RETURN(const T* x, GpuIn<T>(ctx, "X"));
  cuda::Scale<T>(x, GpuOut<T>(ctx, "Out"), ctx.Input("X")->numel(), a, b, after, c->stream);
  return LaunchStatus(ctx);
}

absl::Status MeanKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  const int64_t n = ctx.Input("X")->numel();
  cuda::SumAll<float>(x, n, n ? 1.f / static_cast<float>(n) : 0.f, GpuOut<float>(ctx, "Out"), c->stream);
  return LaunchStatus(ctx);
}

absl::Status MeanGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* g, GpuIn<float>(ctx, GradVarName("Out")));
  const int64_t n = ctx.Input("X")->numel();
  if (float* dx = GpuOut<float>(ctx, GradVarName("X"))) {
    cuda::FillFromDevice<float>(dx, n, g, n ? 1.f / static_cast<float>(n) : 0.f, c->stream);
  }
  return LaunchStatus(ctx);
}

// Out = X[0] + X[1] + ...; Out may be X[0] itself (Fluid's in-place sum of
// gradients), but no other input.
absl::Status SumKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  const size_t k = ctx.InputSize("X");
  for (size_t i = 0; i < k; ++i) {
    const Variable* v = ctx.InputVar("X", i);
    if (v != nullptr && v->IsType<SelectedRows>()) return GpuSumWithSparse(ctx);
  }
  OAR_ASSIGN_OR_RETURN(const float* first, GpuIn<float>(ctx, "X", 0));
  const int64_t n = ctx.Input("X", 0)->numel();
  std::vector<const float*> rest;
  for (size_t i = 1; i < k; ++i) {
    OAR_ASSIGN_OR_RETURN(const float* p, GpuIn<float>(ctx, "X", i));
    if (ctx.Input("X", i)->numel() != n) {
      return absl::InvalidArgumentError(absl::StrCat("sum: input ", InputLabel(ctx.op(), "X", i), " has ",
                                                     ctx.Input("X", i)->numel(), " elements, X[0] ", n));
    }
    rest.push_back(p);
  }
  float* out = GpuOut<float>(ctx, "Out");
  for (const float* p : rest) {
    if (p == out) return absl::UnimplementedError("sum: Out may alias X[0] only, on the GPU");
  }
  if (out != first) {
    OAR_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(out, first, n * sizeof(float), cudaMemcpyDeviceToDevice, c->stream),
                                   "sum: copy X[0]"));
  }
  for (const float* p : rest) cuda::AddTo<float>(p, out, n, c->stream);
  return LaunchStatus(ctx);
}

template <typename T>
absl::Status FillConstantKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const T value, FillConstantValue<T>(ctx));
  Tensor* out = ctx.Output("Out");
  OAR_RETURN_IF_ERROR(ResizeFromShapeTensors(ctx, out));  // a shape computed on the host
  cuda::Fill<T>(out->mutable_data<T>(ctx.place()), out->numel(), value, c->stream);
  return LaunchStatus(ctx);
}

absl::Status SeedGenerator(const ExecutionContext& ctx, CudaContext* c) {
  const int32_t seed = ctx.Attr<int32_t>("seed");
  const uint64_t s = seed != 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
  OAR_RETURN_IF_ERROR(CurandStatus(curandSetPseudoRandomGeneratorSeed(c->curand, s), ctx.op().type + ": seed"));
  return CurandStatus(curandSetGeneratorOffset(c->curand, 0), ctx.op().type + ": offset");
}

absl::Status UniformRandomKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  const float lo = ctx.Attr<float>("min"), hi = ctx.Attr<float>("max");
  if (!(lo <= hi)) return absl::InvalidArgumentError(absl::StrCat("uniform_random: min ", lo, " > max ", hi));
  Tensor* out = ctx.Output("Out");
  OAR_RETURN_IF_ERROR(ResizeFromShapeTensors(ctx, out));  // a shape computed on the host
  float* p = out->mutable_data<float>(ctx.place());
  OAR_RETURN_IF_ERROR(SeedGenerator(ctx, c));
  OAR_RETURN_IF_ERROR(CurandStatus(curandGenerateUniform(c->curand, p, out->numel()), "uniform_random"));
  cuda::AffineUniform<float>(p, out->numel(), lo, hi, c->stream);
  return LaunchStatus(ctx);
}

absl::Status GaussianRandomKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  Tensor* out = ctx.Output("Out");
  OAR_RETURN_IF_ERROR(ResizeFromShapeTensors(ctx, out));  // a shape computed on the host
  const int64_t n = out->numel();
  float* p = out->mutable_data<float>(ctx.place());
  OAR_RETURN_IF_ERROR(SeedGenerator(ctx, c));
  // cuRAND's normal generator makes pairs: an odd count goes through a
  // buffer one longer.
  Tensor scratch;
  float* dst = p;
  if (n % 2 == 1) {
    scratch.Resize(DDim{n + 1});
    dst = scratch.mutable_data<float>(ctx.place());
  }
  OAR_RETURN_IF_ERROR(
      CurandStatus(curandGenerateNormal(c->curand, dst, n + n % 2, ctx.Attr<float>("mean"), ctx.Attr<float>("std")),
                   "gaussian_random"));
  if (dst != p) {
    OAR_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(p, dst, n * sizeof(float), cudaMemcpyDeviceToDevice, c->stream),
                                   "gaussian_random: copy"));
  }
  return LaunchStatus(ctx);
}

}  // namespace

void RegisterCudaPointwiseKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  using cuda::Activation;
  using cuda::Binary;
  r->Extend("elementwise_add").Kernel<float>(ElementwiseKernel<Binary::kAdd>, gpu);
  r->Extend("elementwise_sub").Kernel<float>(ElementwiseKernel<Binary::kSub>, gpu);
  r->Extend("elementwise_mul").Kernel<float>(ElementwiseKernel<Binary::kMul>, gpu);
  r->Extend("elementwise_div").Kernel<float>(ElementwiseKernel<Binary::kDiv>, gpu);
  r->Extend("elementwise_add_grad").Kernel<float>(ElementwiseGradKernel<Binary::kAdd>, gpu);
  r->Extend("elementwise_sub_grad").Kernel<float>(ElementwiseGradKernel<Binary::kSub>, gpu);
  r->Extend("elementwise_mul_grad").Kernel<float>(ElementwiseGradKernel<Binary::kMul>, gpu);
  r->Extend("elementwise_div_grad").Kernel<float>(ElementwiseGradKernel<Binary::kDiv>, gpu);
  r->Extend("elementwise_pow").Kernel<float>(ElementwiseKernel<Binary::kPow>, gpu);
  r->Extend("elementwise_pow_grad").Kernel<float>(ElementwiseGradKernel<Binary::kPow>, gpu);
  r->Extend("elementwise_max").Kernel<float>(ElementwiseKernel<Binary::kMax>, gpu);
  r->Extend("elementwise_min").Kernel<float>(ElementwiseKernel<Binary::kMin>, gpu);
  r->Extend("elementwise_max_grad").Kernel<float>(ElementwiseGradKernel<Binary::kMax>, gpu);
  r->Extend("elementwise_min_grad").Kernel<float>(ElementwiseGradKernel<Binary::kMin>, gpu);
  r->Extend("relu").Kernel<float>(ActivationKernel<Activation::kRelu>, gpu);
  r->Extend("sigmoid").Kernel<float>(ActivationKernel<Activation::kSigmoid>, gpu);
  r->Extend("tanh").Kernel<float>(ActivationKernel<Activation::kTanh>, gpu);
  r->Extend("exp").Kernel<float>(ActivationKernel<Activation::kExp>, gpu);
  r->Extend("sqrt").Kernel<float>(ActivationKernel<Activation::kSqrt>, gpu);
  r->Extend("square").Kernel<float>(ActivationKernel<Activation::kSquare>, gpu);
  r->Extend("cos").Kernel<float>(ActivationKernel<Activation::kCos>, gpu);
  r->Extend("abs").Kernel<float>(ActivationKernel<Activation::kAbs>, gpu);
  r->Extend("floor").Kernel<float>(ActivationKernel<Activation::kFloor>, gpu);
  r->Extend("ceil").Kernel<float>(ActivationKernel<Activation::kCeil>, gpu);
  r->Extend("sign").Kernel<float>(ActivationKernel<Activation::kSign>, gpu);
  r->Extend("relu_grad").Kernel<float>(ActivationGradKernel<Activation::kRelu, false>, gpu);
  r->Extend("sigmoid_grad").Kernel<float>(ActivationGradKernel<Activation::kSigmoid, false>, gpu);
  r->Extend("tanh_grad").Kernel<float>(ActivationGradKernel<Activation::kTanh, false>, gpu);
  r->Extend("exp_grad").Kernel<float>(ActivationGradKernel<Activation::kExp, false>, gpu);
  r->Extend("sqrt_grad").Kernel<float>(ActivationGradKernel<Activation::kSqrt, false>, gpu);
  r->Extend("square_grad").Kernel<float>(ActivationGradKernel<Activation::kSquare, true>, gpu);
  r->Extend("cos_grad").Kernel<float>(ActivationGradKernel<Activation::kCos, true>, gpu);
  r->Extend("abs_grad").Kernel<float>(ActivationGradKernel<Activation::kAbs, true>, gpu);
  r->Extend("floor_grad").Kernel<float>(ZeroGradKernel, gpu);
  r->Extend("ceil_grad").Kernel<float>(ZeroGradKernel, gpu);
  r->Extend("sign_grad").Kernel<float>(ZeroGradKernel, gpu);
  r->Extend("scale").Kernel<float>(ScaleKernel<float>, gpu).Kernel<int64_t>(ScaleKernel<int64_t>, gpu);
  r->Extend("mean").Kernel<float>(MeanKernel, gpu);
  r->Extend("mean_grad").Kernel<float>(MeanGradKernel, gpu);
  r->Extend("sum").Kernel<float>(SumKernel, gpu);
  r->Extend("fill_constant")
      .Kernel<float>(FillConstantKernel<float>, gpu)
      .Kernel<double>(FillConstantKernel<double>, gpu)
      .Kernel<int32_t>(FillConstantKernel<int32_t>, gpu)
      .Kernel<int64_t>(FillConstantKernel<int64_t>, gpu)
      .Kernel<bool>(FillConstantKernel<bool>, gpu);
  r->Extend("uniform_random").Kernel<float>(UniformRandomKernel, gpu);
  r->Extend("gaussian_random").Kernel<float>(GaussianRandomKernel, gpu);
}

}  // namespace oar
