// GPU kernels of conv2d and conv2d_grad on cuDNN (NCHW input, Fluid's MCHW
// filter, groups, strides, paddings, dilations). Each of the three
// convolutions (forward, data gradient, filter gradient) has its algorithm
// chosen once per shape and attributes and cached for the process:
// cuDNN's heuristics (the *_v7 queries) by default, or timed trials
// (FindConvolution*AlgorithmEx) when the op's `exhaustive_search` is set,
// as in Fluid. The first algorithm that fits the op's workspace_size_MB
// wins; its workspace comes from the place's stream-ordered pool.
//
// Thread-safety: the algorithm cache is guarded by its mutex; a kernel
// call's descriptors and workspace are its own.
#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/ops/cuda_op_util.h"
#include "common/ops/cudnn_util.h"

namespace oar {
namespace {

enum class ConvKind { kForward, kBackwardData, kBackwardFilter };

struct AlgoChoice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspace = 0;
};

// One process-wide cache: the key names the device, the kind, the shapes,
// the attributes and the math mode, so entries never go stale.
class AlgoCache {
 public:
  bool Find(const std::string& key, AlgoChoice* out) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    *out = it->second;
    return true;
  }
  void Put(const std::string& key, const AlgoChoice& c) {
    std::lock_guard<std::mutex> lock(mu_);
    map_.emplace(key, c);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, AlgoChoice> map_;
};

AlgoCache& Cache() {
  static AlgoCache* cache = new AlgoCache;
  return *cache;
}

// Everything one conv2d(_grad) call hands cuDNN.
struct ConvCall {
  CudaContext* c = nullptr;
  std::string op;
  cudnn::TensorDesc x_desc, y_desc;
  cudnn::FilterDesc w_desc;
  cudnn::ConvDesc conv;
  std::string key;          // shapes and attributes, for the cache
  size_t limit = 0;         // workspace_size_MB in bytes
  bool exhaustive = false;  // exhaustive_search
};

absl::Status Prepare(const ExecutionContext& ctx, CudaContext* c, const DDim& in, const DDim& f, const DDim& out,
                     ConvCall* call) {
  const OpDesc& op = ctx.op();
  if (ctx.Input("Bias") != nullptr || ctx.Input("ResidualData") != nullptr) {
    return absl::UnimplementedError(absl::StrCat(op.type, ": the fused Bias/ResidualData inputs are not supported"));
  }
  if (in.size() != 4 || f.size() != 4 || out.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(op.type, ": Input", in.ToString(), ", Filter", f.ToString(),
                                                   " and Output", out.ToString(), " must be 4-D"));
  }
  auto s = op.GetAttr<std::vector<int32_t>>("strides");
  auto p = op.GetAttr<std::vector<int32_t>>("paddings");
  auto d = op.GetAttr<std::vector<int32_t>>("dilations");
  if (s.size() != 2 || p.size() != 2 || d.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(op.type, ": strides, paddings and dilations must be two values"));
  }
  const int stride[2] = {s[0], s[1]}, pad[2] = {p[0], p[1]}, dil[2] = {d[0], d[1]};
  const int groups = op.GetAttr<int32_t>("groups");
  call->c = c;
  call->op = op.type;
  OAR_RETURN_IF_ERROR(call->x_desc.Set(op.type, in[0], in[1], in[2], in[3]));
  OAR_RETURN_IF_ERROR(call->y_desc.Set(op.type, out[0], out[1], out[2], out[3]));
  OAR_RETURN_IF_ERROR(call->w_desc.Set(op.type, f[0], f[1], f[2], f[3]));
  OAR_RETURN_IF_ERROR(call->conv.Set(op.type, pad, stride, dil, groups, cudnn::MathType(*c)));
  call->limit = static_cast<size_t>(std::max(op.GetAttr<int32_t>("workspace_size_MB"), 0)) << 20;
  call->exhaustive = op.GetAttr<bool>("exhaustive_search");
  call->key = absl::StrCat(c->device, "|", in.ToString(), f.ToString(), out.ToString(), "|", s[0], ",", s[1], "|", p[0],
                           ",", p[1], "|", d[0], ",", d[1], "|", groups, "|", c->allow_tf32, "|", call->limit, "|",
                           call->exhaustive);
  return absl::OkStatus();
}

// The first result that cuDNN ran (or expects to run) within the limit.
template <typename Perf>
absl::StatusOr<AlgoChoice> Pick(const ConvCall& call, const char* what, const Perf* perf, int n) {
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > call.limit) continue;
    AlgoChoice a;
    a.algo = static_cast<int>(perf[i].algo);
    a.math = call.c->allow_tf32 ? perf[i].mathType : CUDNN_FMA_MATH;
    return a;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      call.op, ": no cuDNN ", what, " algorithm fits workspace_size_MB=", call.limit >> 20, " (", n, " candidates)"));
}

// Scratch for timed trials: the op's limit, at most 256 MiB.
void* TrialWorkspace(const ConvCall& call, Tensor* t, const Place& place, size_t* bytes) {
  *bytes = std::min<size_t>(call.limit, size_t{256} << 20);
  return cudnn::Workspace(t, *bytes, place);
}

absl::StatusOr<AlgoChoice> Choose(ConvKind kind, ConvCall& call, const Place& place, const void* x, const void* w,
                                  const void* y, void* out) {
  const std::string key = absl::StrCat(static_cast<int>(kind), "|", call.key);
  AlgoChoice a;
  if (Cache().Find(key, &a)) return a;
  constexpr int kMax = 16;
  int n = 0;
  Tensor trial;
  size_t trial_bytes = 0;
  void* ws = call.exhaustive ? TrialWorkspace(call, &trial, place, &trial_bytes) : nullptr;
  cudnnHandle_t h = call.c->cudnn;
  const std::string what = call.op + ": choosing the algorithm";
  // Every query starts from the context's math type, whatever an earlier
  // choice on this descriptor set, so a choice depends on its key alone.
  OAR_RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolutionMathType(call.conv.get(), cudnn::MathType(*call.c)), what));
  switch (kind) {
    case ConvKind::kForward: {
      cudnnConvolutionFwdAlgoPerf_t perf[kMax];
      OAR_RETURN_IF_ERROR(CudnnStatus(
          call.exhaustive
              ? cudnnFindConvolutionForwardAlgorithmEx(h, call.x_desc.get(), x, call.w_desc.get(), w, call.conv.get(),
                                                       call.y_desc.get(), out, kMax, &n, perf, ws, trial_bytes)
              : cudnnGetConvolutionForwardAlgorithm_v7(h, call.x_desc.get(), call.w_desc.get(), call.conv.get(),
                                                       call.y_desc.get(), kMax, &n, perf),
          what));
      OAR_ASSIGN_OR_RETURN(a, Pick(call, "forward", perf, n));
      break;
    }
    case ConvKind::kBackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
      OAR_RETURN_IF_ERROR(CudnnStatus(
          call.exhaustive
              ? cudnnFindConvolutionBackwardDataAlgorithmEx(h, call.w_desc.get(), w, call.y_desc.get(), y,
                                                            call.conv.get(), call.x_desc.get(), out, kMax, &n, perf, ws,
                                                            trial_bytes)
              : cudnnGetConvolutionBackwardDataAlgorithm_v7(h, call.w_desc.get(), call.y_desc.get(), call.conv.get(),
                                                            call.x_desc.get(), kMax, &n, perf),
          what));
      OAR_ASSIGN_OR_RETURN(a, Pick(call, "data-gradient", perf, n));
      break;
    }
    case ConvKind::kBackwardFilter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
      OAR_RETURN_IF_ERROR(CudnnStatus(
          call.exhaustive
              ? cudnnFindConvolutionBackwardFilterAlgorithmEx(h, call.x_desc.get(), x, call.y_desc.get(), y,
                                                              call.conv.get(), call.w_desc.get(), out, kMax, &n, perf,
                                                              ws, trial_bytes)
              : cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, call.x_desc.get(), call.y_desc.get(), call.conv.get(),
                                                              call.w_desc.get(), kMax, &n, perf),
          what));
      OAR_ASSIGN_OR_RETURN(a, Pick(call, "filter-gradient", perf, n));
      break;
    }
  }
  OAR_RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolutionMathType(call.conv.get(), a.math), what));
  switch (kind) {
    case ConvKind::kForward:
      OAR_RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionForwardWorkspaceSize(
                                          h, call.x_desc.get(), call.w_desc.get(), call.conv.get(), call.y_desc.get(),
                                          static_cast<cudnnConvolutionFwdAlgo_t>(a.algo), &a.workspace),
                                      what));
      break;
    case ConvKind::kBackwardData:
      OAR_RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionBackwardDataWorkspaceSize(
                                          h, call.w_desc.get(), call.y_desc.get(), call.conv.get(), call.x_desc.get(),
                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo), &a.workspace),
                                      what));
      break;
    case ConvKind::kBackwardFilter:
      OAR_RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionBackwardFilterWorkspaceSize(
                                          h, call.x_desc.get(), call.y_desc.get(), call.conv.get(), call.w_desc.get(),
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo), &a.workspace),
                                      what));
      break;
  }
  Cache().Put(key, a);
  return a;
}

absl::Status ConvKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const float* w, GpuIn<float>(ctx, "Filter"));
  Tensor* out = ctx.Output("Output");
  ConvCall call;
  OAR_RETURN_IF_ERROR(Prepare(ctx, c, ctx.Input("Input")->dims(), ctx.Input("Filter")->dims(), out->dims(), &call));
  float* y = out->mutable_data<float>(ctx.place());
  OAR_ASSIGN_OR_RETURN(AlgoChoice a, Choose(ConvKind::kForward, call, ctx.place(), x, w, nullptr, y));
  OAR_RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolutionMathType(call.conv.get(), a.math), "conv2d: math type"));
  Tensor ws_t;
  void* ws = cudnn::Workspace(&ws_t, a.workspace, ctx.place());
  const float one = 1.f, zero = 0.f;
  return CudnnStatus(cudnnConvolutionForward(c->cudnn, &one, call.x_desc.get(), x, call.w_desc.get(), w,
                                             call.conv.get(), static_cast<cudnnConvolutionFwdAlgo_t>(a.algo), ws,
                                             a.workspace, &zero, call.y_desc.get(), y),
                     "conv2d: cudnnConvolutionForward");
}

absl::Status ConvGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const float* w, GpuIn<float>(ctx, "Filter"));
  OAR_ASSIGN_OR_RETURN(const float* dy, GpuIn<float>(ctx, GradVarName("Output")));
  ConvCall call;
  OAR_RETURN_IF_ERROR(Prepare(ctx, c, ctx.Input("Input")->dims(), ctx.Input("Filter")->dims(),
                              ctx.Input(GradVarName("Output"))->dims(), &call));
  const float one = 1.f, zero = 0.f;
  if (float* dx = GpuOut<float>(ctx, GradVarName("Input"))) {
    OAR_ASSIGN_OR_RETURN(AlgoChoice a, Choose(ConvKind::kBackwardData, call, ctx.place(), x, w, dy, dx));
    OAR_RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolutionMathType(call.conv.get(), a.math), "conv2d_grad: math type"));
    Tensor ws_t;
    void* ws = cudnn::Workspace(&ws_t, a.workspace, ctx.place());
    OAR_RETURN_IF_ERROR(
        CudnnStatus(cudnnConvolutionBackwardData(c->cudnn, &one, call.w_desc.get(), w, call.y_desc.get(), dy,
                                                 call.conv.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo),
                                                 ws, a.workspace, &zero, call.x_desc.get(), dx),
                    "conv2d_grad: cudnnConvolutionBackwardData"));
  }
  if (float* dw = GpuOut<float>(ctx, GradVarName("Filter"))) {
    OAR_ASSIGN_OR_RETURN(AlgoChoice a, Choose(ConvKind::kBackwardFilter, call, ctx.place(), x, w, dy, dw));
    OAR_RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolutionMathType(call.conv.get(), a.math), "conv2d_grad: math type"));
    Tensor ws_t;
    void* ws = cudnn::Workspace(&ws_t, a.workspace, ctx.place());
    OAR_RETURN_IF_ERROR(CudnnStatus(
        cudnnConvolutionBackwardFilter(c->cudnn, &one, call.x_desc.get(), x, call.y_desc.get(), dy, call.conv.get(),
                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo), ws, a.workspace, &zero,
                                       call.w_desc.get(), dw),
        "conv2d_grad: cudnnConvolutionBackwardFilter"));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterCudaConvKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend("conv2d").Kernel<float>(ConvKernel, gpu);
  r->Extend("conv2d_grad").Kernel<float>(ConvGradKernel, gpu);
}

}  // namespace oar
