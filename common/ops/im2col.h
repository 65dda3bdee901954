// im2col / col2im for 2-D convolution over one image, NCHW: the column
// matrix is [C·kh·kw, out_h·out_w], so a convolution is one GEMM per group.
//
// Thread-safety: stateless.
#pragma once

#include <cstdint>

namespace oar {

struct ConvGeometry {
  int64_t channels, height, width;  // of the input image (one group)
  int64_t kernel_h, kernel_w;
  int64_t stride_h, stride_w;
  int64_t pad_h, pad_w;
  int64_t dilation_h, dilation_w;
  int64_t out_h, out_w;
};

// Output extent of a convolution along one axis; <= 0 when the window does
// not fit.
inline int64_t ConvOutSize(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation) {
  return (in + 2 * pad - (dilation * (k - 1) + 1)) / stride + 1;
}

// col[c·kh·kw + i·kw + j][oh·out_w + ow] = im[c][oh·s - p + i·d][ow·s - p + j·d]
// (0 outside the image).
template <typename T>
void Im2Col(const T* im, const ConvGeometry& g, T* col);

// The adjoint: adds each column entry back into `im` (which the caller
// zeroes first).
template <typename T>
void Col2Im(const T* col, const ConvGeometry& g, T* im);

}  // namespace oar
