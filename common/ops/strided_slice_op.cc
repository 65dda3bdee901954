// strided_slice (Paddle 2.x's x[a:b:s] and fluid.layers.strided_slice):
// along each of `axes`, every `strides`-th element from `starts` towards
// `ends`, Python's slicing rules (negative positions count from the end,
// out-of-range ones are clamped, a negative stride walks backwards);
// `decrease_axis` drops those (size-1) dimensions. Its gradient puts
// Out@GRAD back at the positions read, zeros elsewhere.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

struct Walk {
  std::vector<int64_t> start, step, count;  // per input dimension
  DDim out;                                 // before decrease_axis
  DDim shown;                               // after
};

absl::StatusOr<Walk> Plan(const ExecutionContext& ctx, const DDim& in) {
  const auto axes = ctx.Attr<std::vector<int32_t>>("axes");
  const auto starts = ctx.Attr<std::vector<int32_t>>("starts");
  const auto ends = ctx.Attr<std::vector<int32_t>>("ends");
  const auto strides = ctx.Attr<std::vector<int32_t>>("strides");
  if (starts.size() != axes.size() || ends.size() != axes.size() || strides.size() != axes.size()) {
    return absl::InvalidArgumentError("strided_slice: axes, starts, ends and strides must have one value each");
  }
  Walk w;
  w.out = in;
  for (int d = 0; d < in.size(); ++d) w.start.push_back(0), w.step.push_back(1), w.count.push_back(in[d]);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int a = axes[i] < 0 ? axes[i] + in.size() : axes[i];
    const int64_t n = in[a], s = strides[i];
    if (a < 0 || a >= in.size() || s == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("strided_slice: axis ", axes[i], " or stride ", s, " is invalid for Input", in.ToString()));
    }
    int64_t b = starts[i] < 0 ? starts[i] + n : starts[i], e = ends[i] < 0 ? ends[i] + n : ends[i];
    int64_t count;
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, n), e = std::clamp<int64_t>(e, 0, n);
      count = std::max<int64_t>(0, (e - b + s - 1) / s);
    } else {
      b = std::clamp<int64_t>(b, -1, n - 1), e = std::clamp<int64_t>(e, -1, n - 1);
      count = std::max<int64_t>(0, (b - e - s - 1) / -s);
    }
    w.start[a] = b, w.step[a] = s, w.count[a] = count;
    w.out[a] = count;
  }
  std::vector<int64_t> shown;
  const auto dec = ctx.Attr<std::vector<int32_t>>("decrease_axis");
  for (int d = 0; d < in.size(); ++d) {
    if (std::find(dec.begin(), dec.end(), d) == dec.end()) shown.push_back(w.out[d]);
  }
  w.shown = DDim(shown);
  return w;
}

// fn(out_index, in_index) for every element read.
template <typename Fn>
void ForEach(const Walk& w, const DDim& in, Fn fn) {
  const int r = in.size();
  for (int64_t o = 0, n = w.out.numel(); o < n; ++o) {
    int64_t rest = o, src = 0, stride = 1;
    for (int d = r - 1; d >= 0; --d) {
      const int64_t i = rest % w.out[d];
      rest /= w.out[d];
      src += (w.start[d] + i * w.step[d]) * stride;
      stride *= in[d];
    }
    fn(o, src);
  }
}

template <typename T>
absl::Status StridedSliceKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Walk w, Plan(ctx, x->dims()));
  const T* xp = x->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(w.shown);
  ForEach(w, x->dims(), [&](int64_t i, int64_t s) { o[i] = xp[s]; });
  return absl::OkStatus();
}

template <typename T>
absl::Status StridedSliceGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_ASSIGN_OR_RETURN(const Walk w, Plan(ctx, x->dims()));
  Tensor* dx = ctx.Output(GradVarName("Input"));
  if (dx == nullptr) return absl::OkStatus();
  if (g->numel() != w.out.numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("strided_slice_grad: Out@GRAD", g->dims().ToString(), " is not ", w.shown.ToString()));
  }
  const T* gp = g->data<T>();
  T* d = dx->mutable_data<T>(x->dims());
  std::fill(d, d + dx->numel(), T(0));
  ForEach(w, x->dims(), [&](int64_t i, int64_t s) { d[s] += gp[i]; });
  return absl::OkStatus();
}

}  // namespace

void RegisterStridedSliceOp(OpRegistry* r) {
  auto attrs = [](OpInfo& i) -> OpInfo& {
    return i.Attr("axes", std::vector<int32_t>{})
        .Attr("starts", std::vector<int32_t>{})
        .Attr("ends", std::vector<int32_t>{})
        .Attr("strides", std::vector<int32_t>{})
        .Attr("infer_flags", std::vector<int32_t>{})
        .Attr("decrease_axis", std::vector<int32_t>{})
        .Input("StartsTensor", kUnimplemented)
        .Input("EndsTensor", kUnimplemented)
        .Input("StridesTensor", kUnimplemented)
        .Input("StartsTensorList", kDuplicable | kUnimplemented)
        .Input("EndsTensorList", kDuplicable | kUnimplemented)
        .Input("StridesTensorList", kDuplicable | kUnimplemented);
  };
  auto any = +[](const ExecutionContext& c) { return InputDtypeOf(c, "Input"); };
  NumericCpuKernels(attrs(r->Register("strided_slice").NotInPlace().Input("Input").Output("Out"))
                        .SetInferShape(NoShapeInference)
                        .SetKernelDtype(any)
                        .SetGradMaker(GradOpMaker({"Input"}, {}, {"Out"}, {"Input"})),
                    StridedSliceKernel<float>, StridedSliceKernel<double>, StridedSliceKernel<int32_t>,
                    StridedSliceKernel<int64_t>);
  attrs(r->Register("strided_slice_grad")
            .NotInPlace()
            .Input("Input")
            .Input(GradVarName("Out"))
            .Output(GradVarName("Input"), kDispensable))
      .SetInferShape(NoShapeInference)
      .Kernel<float>(StridedSliceGradKernel<float>)
      .Kernel<double>(StridedSliceGradKernel<double>);
}

}  // namespace oar
