// cuDNN descriptors for the GPU kernels of conv2d, pool2d and batch_norm
// (CUDA builds only): each owns one descriptor, made in its constructor
// and destroyed with it, and its Set* returns a status naming the op.
// Also a scratch buffer on the device for cuDNN's workspaces, and the math
// type every float32 call uses (FMA only unless --gpu_allow_tf32: cuDNN's
// default math lets Ampere and Hopper use TF32, which would move results
// away from the CPU's in the 4th digit).
//
// Thread-safety: a descriptor belongs to the kernel call that made it.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/device/cuda_context.h"
#include "common/framework/tensor.h"

namespace oar {
namespace cudnn {

inline cudnnMathType_t MathType(const CudaContext& c) { return c.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH; }

// Owns one cuDNN descriptor: made by Create in the constructor (its status
// is reported by the first Set), destroyed with the object.
template <typename D, cudnnStatus_t (*Create)(D*), cudnnStatus_t (*Destroy)(D)>
class Descriptor {
 public:
  Descriptor() { created_ = Create(&d_); }
  ~Descriptor() {
    if (d_ != nullptr) Destroy(d_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  D get() const { return d_; }

 protected:
  absl::Status Created(const std::string& op) const { return CudnnStatus(created_, op + ": creating a descriptor"); }
  cudnnStatus_t created_;
  D d_ = nullptr;
};

// A float32 NCHW tensor.
class TensorDesc
    : public Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor> {
 public:
  absl::Status Set(const std::string& op, int64_t n, int64_t c, int64_t h, int64_t w) {
    OAR_RETURN_IF_ERROR(Created(op));
    return CudnnStatus(cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                                  static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)),
                       absl::StrCat(op, ": tensor descriptor [", n, ", ", c, ", ", h, ", ", w, "]"));
  }
};

// A float32 KCRS filter (Fluid's [out_channels, in_channels / groups, kh, kw]).
class FilterDesc
    : public Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor> {
 public:
  absl::Status Set(const std::string& op, int64_t k, int64_t c, int64_t h, int64_t w) {
    OAR_RETURN_IF_ERROR(Created(op));
    return CudnnStatus(cudnnSetFilter4dDescriptor(d_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(k),
                                                  static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)),
                       absl::StrCat(op, ": filter descriptor [", k, ", ", c, ", ", h, ", ", w, "]"));
  }
};

class ConvDesc : public Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                                   cudnnDestroyConvolutionDescriptor> {
 public:
  // Cross-correlation (what Fluid's conv2d computes), float32 accumulation.
  absl::Status Set(const std::string& op, const int pad[2], const int stride[2], const int dilation[2], int groups,
                   cudnnMathType_t math) {
    OAR_RETURN_IF_ERROR(Created(op));
    OAR_RETURN_IF_ERROR(
        CudnnStatus(cudnnSetConvolution2dDescriptor(d_, pad[0], pad[1], stride[0], stride[1], dilation[0], dilation[1],
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                    op + ": convolution descriptor"));
    OAR_RETURN_IF_ERROR(CudnnStatus(cudnnSetConvolutionGroupCount(d_, groups), op + ": group count"));
    return CudnnStatus(cudnnSetConvolutionMathType(d_, math), op + ": math type");
  }
};

class PoolDesc
    : public Descriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor> {
 public:
  absl::Status Set(const std::string& op, cudnnPoolingMode_t mode, const int window[2], const int pad[2],
                   const int stride[2]) {
    OAR_RETURN_IF_ERROR(Created(op));
    return CudnnStatus(cudnnSetPooling2dDescriptor(d_, mode, CUDNN_PROPAGATE_NAN, window[0], window[1], pad[0], pad[1],
                                                   stride[0], stride[1]),
                       op + ": pooling descriptor");
  }
};

// `bytes` of device scratch on `place` (a workspace), freed with the Tensor
// into the place's stream-ordered pool; nullptr for 0 bytes.
inline void* Workspace(Tensor* t, size_t bytes, const Place& place) {
  if (bytes == 0) return nullptr;
  t->Resize(DDim{static_cast<int64_t>(bytes)});
  return t->mutable_data<uint8_t>(place);
}

}  // namespace cudnn
}  // namespace oar
