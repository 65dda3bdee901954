// The bare cuBLAS/cuDNN calls of a program's ops; see gpu_library_calls.h.
#include "bench/gpu_library_calls.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/device/cuda_context.h"
#include "common/ops/cudnn_util.h"
#include "glog/logging.h"

namespace oar::bench {
namespace {

// A variable's shape as the program declares it, the batch for -1: the
// temporaries live in the executor's child scope, out of reach here.
DDim DimsOf(const BlockDesc& block, const std::string& name, int64_t batch) {
  const VarDesc* v = block.FindVar(name);
  CHECK(v != nullptr) << name << " is not declared in block 0";
  std::vector<int64_t> d = v->shape;
  for (int64_t& x : d) {
    if (x < 0) x = batch;
  }
  return DDim(d);
}

#define OAR_CUBLAS(call) CHECK_EQ((call), CUBLAS_STATUS_SUCCESS) << #call
#define OAR_CUDNN(call) CHECK_EQ((call), CUDNN_STATUS_SUCCESS) << #call

std::vector<int> IntsAttr(const OpDesc& op, const std::string& name) {
  std::vector<int> out;
  for (int32_t v : op.GetAttr<std::vector<int32_t>>(name)) out.push_back(v);
  return out;
}

}  // namespace

LibraryCalls::~LibraryCalls() {
  for (void* p : buffers_) cudaFree(p);
}

void* LibraryCalls::Buffer(size_t bytes) {
  void* p = nullptr;
  CHECK_EQ(cudaMalloc(&p, bytes == 0 ? 4 : bytes), cudaSuccess) << "cudaMalloc " << bytes;
  CHECK_EQ(cudaMemset(p, 0, bytes == 0 ? 4 : bytes), cudaSuccess);
  buffers_.push_back(p);
  return p;
}

absl::StatusOr<std::unique_ptr<LibraryCalls>> LibraryCalls::FromProgram(const ProgramDesc& program, int64_t batch,
                                                                        int device) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, GetCudaContext(device));
  c->Activate();
  std::unique_ptr<LibraryCalls> lc(new LibraryCalls);
  lc->stream_ = c->stream;
  const BlockDesc& block = program.Block(0);
  for (size_t i = 0; i < block.OpSize(); ++i) {
    const OpDesc& op = block.Op(i);
    const bool grad = op.type.size() > 5 && op.type.compare(op.type.size() - 5, 5, "_grad") == 0;
    const std::string base = grad ? op.type.substr(0, op.type.size() - 5) : op.type;
    if (base == "mul") {
      const DDim x = DimsOf(block, op.Input("X")[0], batch).FlattenTo2D(op.GetAttr<int32_t>("x_num_col_dims"));
      const DDim y = DimsOf(block, op.Input("Y")[0], batch).FlattenTo2D(op.GetAttr<int32_t>("y_num_col_dims"));
      const int m = static_cast<int>(x[0]), k = static_cast<int>(x[1]), n = static_cast<int>(y[1]);
      float* a = static_cast<float*>(lc->Buffer(sizeof(float) * m * k));
      float* b = static_cast<float*>(lc->Buffer(sizeof(float) * k * n));
      float* out = static_cast<float*>(lc->Buffer(sizeof(float) * m * n));
      cublasHandle_t h = c->cublas;
      static const float one = 1.f, zero = 0.f;
      if (!grad) {  // Out[m,n] = A[m,k]·B[k,n], row-major as Outᵀ = Bᵀ·Aᵀ
        lc->calls_.push_back(
            [=] { OAR_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, out, n)); });
        lc->gemms_ += 1;
      } else {  // dA = dOut·Bᵀ and dB = Aᵀ·dOut
        float* da = static_cast<float*>(lc->Buffer(sizeof(float) * m * k));
        float* db = static_cast<float*>(lc->Buffer(sizeof(float) * k * n));
        lc->calls_.push_back(
            [=] { OAR_CUBLAS(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, k, m, n, &one, b, n, out, n, &zero, da, k)); });
        lc->calls_.push_back(
            [=] { OAR_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, n, k, m, &one, out, n, a, k, &zero, db, n)); });
        lc->gemms_ += 2;
      }
    } else if (base == "conv2d") {
      const DDim in = DimsOf(block, op.Input("Input")[0], batch), f = DimsOf(block, op.Input("Filter")[0], batch);
      const DDim out = DimsOf(block, grad ? op.Input("Output@GRAD")[0] : op.Output("Output")[0], batch);
      auto x_desc = std::make_shared<cudnn::TensorDesc>(), y_desc = std::make_shared<cudnn::TensorDesc>();
      auto w_desc = std::make_shared<cudnn::FilterDesc>();
      auto conv = std::make_shared<cudnn::ConvDesc>();
      const std::vector<int> s = IntsAttr(op, "strides"), p = IntsAttr(op, "paddings"), d = IntsAttr(op, "dilations");
      OAR_RETURN_IF_ERROR(x_desc->Set("bench", in[0], in[1], in[2], in[3]));
      OAR_RETURN_IF_ERROR(y_desc->Set("bench", out[0], out[1], out[2], out[3]));
      OAR_RETURN_IF_ERROR(w_desc->Set("bench", f[0], f[1], f[2], f[3]));
      OAR_RETURN_IF_ERROR(
          conv->Set("bench", p.data(), s.data(), d.data(), op.GetAttr<int32_t>("groups"), cudnn::MathType(*c)));
      void* x = lc->Buffer(sizeof(float) * in.numel());
      void* w = lc->Buffer(sizeof(float) * f.numel());
      void* y = lc->Buffer(sizeof(float) * out.numel());
      cudnnHandle_t h = c->cudnn;
      static const float one = 1.f, zero = 0.f;
      int n = 0;
      if (!grad) {
        cudnnConvolutionFwdAlgoPerf_t perf;
        OAR_RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionForwardAlgorithm_v7(
                                            h, x_desc->get(), w_desc->get(), conv->get(), y_desc->get(), 1, &n, &perf),
                                        "bench: forward algorithm"));
        void* ws = lc->Buffer(perf.memory);
        lc->calls_.push_back([=] {
          OAR_CUDNN(cudnnConvolutionForward(h, &one, x_desc->get(), x, w_desc->get(), w, conv->get(), perf.algo, ws,
                                            perf.memory, &zero, y_desc->get(), y));
        });
        lc->convs_ += 1;
      } else {
        const std::vector<std::string>& dx_name = op.Output("Input@GRAD");
        if (!dx_name.empty() && dx_name[0] != "@EMPTY@") {
          cudnnConvolutionBwdDataAlgoPerf_t perf;
          OAR_RETURN_IF_ERROR(
              CudnnStatus(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w_desc->get(), y_desc->get(), conv->get(),
                                                                      x_desc->get(), 1, &n, &perf),
                          "bench: data-gradient algorithm"));
          void* ws = lc->Buffer(perf.memory);
          void* dx = lc->Buffer(sizeof(float) * in.numel());
          lc->calls_.push_back([=] {
            OAR_CUDNN(cudnnConvolutionBackwardData(h, &one, w_desc->get(), w, y_desc->get(), y, conv->get(), perf.algo,
                                                   ws, perf.memory, &zero, x_desc->get(), dx));
          });
          lc->convs_ += 1;
        }
        cudnnConvolutionBwdFilterAlgoPerf_t perf;
        OAR_RETURN_IF_ERROR(CudnnStatus(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                            h, x_desc->get(), y_desc->get(), conv->get(), w_desc->get(), 1, &n, &perf),
                                        "bench: filter-gradient algorithm"));
        void* ws = lc->Buffer(perf.memory);
        void* dw = lc->Buffer(sizeof(float) * f.numel());
        lc->calls_.push_back([=] {
          OAR_CUDNN(cudnnConvolutionBackwardFilter(h, &one, x_desc->get(), x, y_desc->get(), y, conv->get(), perf.algo,
                                                   ws, perf.memory, &zero, w_desc->get(), dw));
        });
        lc->convs_ += 1;
      }
    } else if (base == "pool2d") {
      const DDim in = DimsOf(block, op.Input("X")[0], batch);
      const DDim out = DimsOf(block, grad ? op.Input("Out")[0] : op.Output("Out")[0], batch);
      auto x_desc = std::make_shared<cudnn::TensorDesc>(), y_desc = std::make_shared<cudnn::TensorDesc>();
      auto pool = std::make_shared<cudnn::PoolDesc>();
      const std::vector<int> k = IntsAttr(op, "ksize"), s = IntsAttr(op, "strides"), p = IntsAttr(op, "paddings");
      OAR_RETURN_IF_ERROR(x_desc->Set("bench", in[0], in[1], in[2], in[3]));
      OAR_RETURN_IF_ERROR(y_desc->Set("bench", out[0], out[1], out[2], out[3]));
      const cudnnPoolingMode_t mode =
          op.GetAttr<std::string>("pooling_type") == "max"
              ? CUDNN_POOLING_MAX_DETERMINISTIC
              : (op.GetAttr<bool>("exclusive") ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                                               : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING);
      OAR_RETURN_IF_ERROR(pool->Set("bench", mode, k.data(), p.data(), s.data()));
      void* x = lc->Buffer(sizeof(float) * in.numel());
      void* y = lc->Buffer(sizeof(float) * out.numel());
      cudnnHandle_t h = c->cudnn;
      static const float one = 1.f, zero = 0.f;
      if (!grad) {
        lc->calls_.push_back(
            [=] { OAR_CUDNN(cudnnPoolingForward(h, pool->get(), &one, x_desc->get(), x, &zero, y_desc->get(), y)); });
      } else {
        void* dx = lc->Buffer(sizeof(float) * in.numel());
        lc->calls_.push_back([=] {
          OAR_CUDNN(cudnnPoolingBackward(h, pool->get(), &one, y_desc->get(), y, y_desc->get(), y, x_desc->get(), x,
                                         &zero, x_desc->get(), dx));
        });
      }
      lc->pools_ += 1;
    } else if (base == "batch_norm") {
      const DDim in = DimsOf(block, op.Input("X")[0], batch);
      const int64_t ch = in[1], hw = in.numel() / in[0] / in[1];
      auto x_desc = std::make_shared<cudnn::TensorDesc>(), s_desc = std::make_shared<cudnn::TensorDesc>();
      OAR_RETURN_IF_ERROR(x_desc->Set("bench", in[0], ch, hw, 1));
      OAR_RETURN_IF_ERROR(s_desc->Set("bench", 1, ch, 1, 1));
      void* x = lc->Buffer(sizeof(float) * in.numel());
      void* y = lc->Buffer(sizeof(float) * in.numel());
      float* stats = static_cast<float*>(lc->Buffer(sizeof(float) * ch * 6));
      cudnnHandle_t h = c->cudnn;
      static const float one = 1.f, zero = 0.f;
      if (!grad) {
        lc->calls_.push_back([=] {
          OAR_CUDNN(cudnnBatchNormalizationForwardTraining(
              h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, x_desc->get(), x, x_desc->get(), y, s_desc->get(), stats,
              stats + ch, 0.1, stats + 2 * ch, stats + 3 * ch, 1e-5, stats + 4 * ch, stats + 5 * ch));
        });
      } else {
        void* dx = lc->Buffer(sizeof(float) * in.numel());
        float* dstats = static_cast<float*>(lc->Buffer(sizeof(float) * ch * 2));
        lc->calls_.push_back([=] {
          OAR_CUDNN(cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, x_desc->get(),
                                                    x, x_desc->get(), y, x_desc->get(), dx, s_desc->get(), stats,
                                                    dstats, dstats + ch, 1e-5, stats + 4 * ch, stats + 5 * ch));
        });
      }
      lc->norms_ += 1;
    }
  }
  // The buffers were zeroed on the legacy stream: done before any call.
  CHECK_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return lc;
}

void LibraryCalls::RunAll() {
  for (auto& call : calls_) call();
  CHECK_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), cudaSuccess);
}

std::string LibraryCalls::Summary() const {
  return absl::StrCat(gemms_, " GEMMs, ", convs_, " convolutions, ", pools_, " poolings, ", norms_, " batch norms");
}

}  // namespace oar::bench
