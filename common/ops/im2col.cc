#include "common/ops/im2col.h"

#include <cstring>

namespace oar {

template <typename T>
void Im2Col(const T* im, const ConvGeometry& g, T* col) {
  const int64_t plane = g.out_h * g.out_w;
  for (int64_t c = 0; c < g.channels; ++c) {
    const T* src = im + c * g.height * g.width;
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        T* dst = col + ((c * g.kernel_h + i) * g.kernel_w + j) * plane;
        for (int64_t oh = 0; oh < g.out_h; ++oh) {
          const int64_t h = oh * g.stride_h - g.pad_h + i * g.dilation_h;
          T* row = dst + oh * g.out_w;
          if (h < 0 || h >= g.height) {
            std::memset(row, 0, sizeof(T) * g.out_w);
            continue;
          }
          const T* srow = src + h * g.width;
          const int64_t w0 = j * g.dilation_w - g.pad_w;
          if (g.stride_w == 1 && w0 >= 0 && w0 + g.out_w <= g.width) {
            std::memcpy(row, srow + w0, sizeof(T) * g.out_w);  // the common interior case
            continue;
          }
          for (int64_t ow = 0; ow < g.out_w; ++ow) {
            const int64_t w = ow * g.stride_w + w0;
            row[ow] = (w >= 0 && w < g.width) ? srow[w] : T(0);
          }
        }
      }
    }
  }
}

template <typename T>
void Col2Im(const T* col, const ConvGeometry& g, T* im) {
  const int64_t plane = g.out_h * g.out_w;
  for (int64_t c = 0; c < g.channels; ++c) {
    T* dst = im + c * g.height * g.width;
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const T* src = col + ((c * g.kernel_h + i) * g.kernel_w + j) * plane;
        for (int64_t oh = 0; oh < g.out_h; ++oh) {
          const int64_t h = oh * g.stride_h - g.pad_h + i * g.dilation_h;
          if (h < 0 || h >= g.height) continue;
          T* drow = dst + h * g.width;
          const T* row = src + oh * g.out_w;
          const int64_t w0 = j * g.dilation_w - g.pad_w;
          for (int64_t ow = 0; ow < g.out_w; ++ow) {
            const int64_t w = ow * g.stride_w + w0;
            if (w >= 0 && w < g.width) drow[w] += row[ow];
          }
        }
      }
    }
  }
}

template void Im2Col<float>(const float*, const ConvGeometry&, float*);
template void Im2Col<double>(const double*, const ConvGeometry&, double*);
template void Col2Im<float>(const float*, const ConvGeometry&, float*);
template void Col2Im<double>(const double*, const ConvGeometry&, double*);

}  // namespace oar
