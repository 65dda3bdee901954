// Box geometry of Fluid's detection layers, each without a gradient, as
// Fluid computes it: iou_similarity (the IoU of every box of X with every
// box of Y; box_normalized=false counts pixel ends inclusively),
// box_clip (each LoD sequence's boxes clipped to its image, ImInfo = height,
// width, scale) and polygon_box_transform (EAST's geometry map: offsets to
// absolute coordinates on a 4× grid).
//
// Thread-safety: stateless kernels.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"
#include "common/ops/sequence_util.h"

namespace oar {
namespace {

absl::Status BoxesOf(const ExecutionContext& ctx, const std::string& slot, const Tensor& t) {
  if (t.dims().size() != 2 || t.dims()[1] != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), slot), t.dims().ToString(), " is not [N, 4] boxes"));
  }
  return absl::OkStatus();
}

template <typename T>
T Iou(const T* a, const T* b, bool normalized) {
  const T one = normalized ? T(0) : T(1);
  const T area_a = (a[2] - a[0] + one) * (a[3] - a[1] + one);
  const T area_b = (b[2] - b[0] + one) * (b[3] - b[1] + one);
  const T w = std::max(std::min(a[2], b[2]) - std::max(a[0], b[0]) + one, T(0));
  const T h = std::max(std::min(a[3], b[3]) - std::max(a[1], b[1]) + one, T(0));
  const T inter = w * h;
  return inter / (area_a + area_b - inter);
}

template <typename T>
absl::Status IouSimilarityKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_RETURN_IF_ERROR(BoxesOf(ctx, "X", *x));
  OAR_RETURN_IF_ERROR(BoxesOf(ctx, "Y", *y));
  const bool normalized = ctx.Attr<bool>("box_normalized");
  const int64_t n = x->dims()[0], m = y->dims()[0];
  Tensor* out = ctx.Output("Out");
  T* o = out->mutable_data<T>(DDim{n, m});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) o[i * m + j] = Iou(x->data<T>() + 4 * i, y->data<T>() + 4 * j, normalized);
  }
  out->set_lod(x->lod());
  return absl::OkStatus();
}

template <typename T>
absl::Status BoxClipKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* info, RequireInput(ctx, "ImInfo"));
  OAR_ASSIGN_OR_RETURN(std::vector<size_t> off, LastLevel(ctx, "Input", *in));
  const int64_t width = in->dims()[0] == 0 ? 4 : in->numel() / in->dims()[0];
  if (width % 4 != 0 || info->dims().size() != 2 || info->dims()[1] != 3 ||
      info->dims()[0] < static_cast<int64_t>(off.size()) - 1) {
    return absl::InvalidArgumentError(absl::StrCat("box_clip: Input", in->dims().ToString(),
                                                   " must be boxes of 4 "
                                                   "and ImInfo",
                                                   info->dims().ToString(), " one [h, w, scale] per sequence"));
  }
  Tensor* out = ctx.Output("Output");
  T* o = out->mutable_data<T>(in->dims());
  const T* b = in->data<T>();
  for (size_t s = 0; s + 1 < off.size(); ++s) {
    const T* im = info->data<T>() + 3 * s;
    const T w = std::round(im[1] / im[2]) - T(1), h = std::round(im[0] / im[2]) - T(1);
    for (int64_t i = static_cast<int64_t>(off[s]) * width; i < static_cast<int64_t>(off[s + 1]) * width; ++i) {
      o[i] = std::max(std::min(b[i], i % 2 == 0 ? w : h), T(0));
    }
  }
  out->set_lod(in->lod());
  return absl::OkStatus();
}

template <typename T>
absl::Status PolygonBoxTransformKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  if (in->dims().size() != 4 || in->dims()[1] % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("polygon_box_transform: Input", in->dims().ToString(), " is not [N, 2k, H, W]"));
  }
  const int64_t planes = in->dims()[0] * in->dims()[1], h = in->dims()[2], w = in->dims()[3];
  T* o = ctx.Output("Output")->mutable_data<T>(in->dims());
  const T* x = in->data<T>();
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t r = 0; r < h; ++r) {
      for (int64_t c = 0; c < w; ++c) {
        const int64_t i = (p * h + r) * w + c;
        o[i] = static_cast<T>(4 * (p % 2 == 0 ? c : r)) - x[i];
      }
    }
  }
  return absl::OkStatus();
}

#define OAR_FLOATS(K) Kernel<float>(K<float>).Kernel<double>(K<double>)

}  // namespace

void RegisterBoxOps(OpRegistry* r) {
  r->Register("iou_similarity")
      .Input("X")
      .Input("Y")
      .Output("Out")
      .Attr("box_normalized", true)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS(IouSimilarityKernel);
  r->Register("box_clip")
      .Input("Input")
      .Input("ImInfo")
      .Output("Output")
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS(BoxClipKernel);
  r->Register("polygon_box_transform")
      .Input("Input")
      .Output("Output")
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS(PolygonBoxTransformKernel);
}

}  // namespace oar
