// Functions of matrices and reductions of paddle.*, with Paddle's slots and
// gradients (float32): trace (the diagonal at `offset` of axes axis1 and
// axis2), inverse (Eigen's partial-pivot LU; dX = −Yᵀ·dY·Yᵀ), cholesky
// (Eigen's LLT; lower, or upper = the transpose; the gradient is
// ½(S + Sᵀ), S = L⁻ᵀ·Φ(Lᵀ·dL)·L⁻¹, Φ the lower triangle with its diagonal
// halved), logsumexp (over `axis`, or all) and dist (‖X − Y‖_p). Batches of
// matrices are the leading dimensions.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/LU>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapC = Eigen::Map<const Mat>;
using Map = Eigen::Map<Mat>;

absl::StatusOr<int64_t> SquareBatch(const ExecutionContext& ctx, const Tensor& t, const char* slot) {
  const DDim& d = t.dims();
  if (d.size() < 2 || d[d.size() - 1] != d[d.size() - 2]) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), slot), d.ToString(),
                                                   " is not a (batch of) square matrix"));
  }
  return d[d.size() - 1];
}

// ---- trace ----

struct Diagonal {
  DDim out;
  std::vector<std::vector<int64_t>> cells;  // per output element, the input cells summed
};

absl::StatusOr<Diagonal> DiagonalOf(const ExecutionContext& ctx, const DDim& d) {
  int a1 = ctx.Attr<int32_t>("axis1"), a2 = ctx.Attr<int32_t>("axis2");
  const int64_t off = ctx.Attr<int32_t>("offset");
  if (a1 < 0) a1 += d.size();
  if (a2 < 0) a2 += d.size();
  if (a1 < 0 || a2 < 0 || a1 >= d.size() || a2 >= d.size() || a1 == a2) {
    return absl::InvalidArgumentError(absl::StrCat("trace: axis1 and axis2 must name two axes of Input", d.ToString()));
  }
  Diagonal g;
  std::vector<int64_t> od;
  for (int k = 0; k < d.size(); ++k) {
    if (k != a1 && k != a2) od.push_back(d[k]);
  }
  g.out = DDim(od);
  g.cells.resize(static_cast<size_t>(g.out.numel()));
  std::vector<int64_t> idx(static_cast<size_t>(d.size()));
  for (int64_t e = 0; e < d.numel(); ++e) {
    int64_t rest = e;
    for (int k = d.size() - 1; k >= 0; --k) idx[static_cast<size_t>(k)] = rest % d[k], rest /= d[k];
    if (idx[static_cast<size_t>(a2)] - idx[static_cast<size_t>(a1)] != off) continue;
    int64_t o = 0;
    for (int k = 0; k < d.size(); ++k) {
      if (k != a1 && k != a2) o = o * d[k] + idx[static_cast<size_t>(k)];
    }
    g.cells[static_cast<size_t>(o)].push_back(e);
  }
  return g;
}

template <bool kGrad>
absl::Status TraceKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Diagonal g, DiagonalOf(ctx, in->dims()));
  if (!kGrad) {
    float* o = ctx.Output("Out")->mutable_data<float>(g.out);
    for (size_t i = 0; i < g.cells.size(); ++i) {
      o[i] = 0;
      for (int64_t c : g.cells[i]) o[i] += in->data<float>()[c];
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* dout, RequireInput(ctx, GradVarName("Out")));
  float* d = ZeroedGradOutput<float>(ctx, "Input", in->dims());
  if (d == nullptr) return absl::OkStatus();
  for (size_t i = 0; i < g.cells.size(); ++i) {
    for (int64_t c : g.cells[i]) d[c] = dout->data<float>()[i];
  }
  return absl::OkStatus();
}

// ---- inverse ----

absl::Status InverseKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const int64_t n, SquareBatch(ctx, *in, "Input"));
  float* o = ctx.Output("Output")->mutable_data<float>(in->dims());
  for (int64_t b = 0; b < in->numel() / std::max<int64_t>(n * n, 1); ++b) {
    Eigen::PartialPivLU<Mat> lu(MapC(in->data<float>() + b * n * n, n, n));
    if (lu.determinant() == 0.f) {
      return absl::InvalidArgumentError(absl::StrCat("inverse: matrix ", b, " of Input is singular"));
    }
    Map(o + b * n * n, n, n) = lu.inverse();
  }
  return absl::OkStatus();
}

absl::Status InverseGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Output"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Output")));
  OAR_ASSIGN_OR_RETURN(const int64_t n, SquareBatch(ctx, *y, "Output"));
  Tensor* dx = ctx.Output(GradVarName("Input"));
  if (dx == nullptr) return absl::OkStatus();
  float* d = dx->mutable_data<float>(y->dims());
  for (int64_t b = 0; b < y->numel() / std::max<int64_t>(n * n, 1); ++b) {
    const MapC yi(y->data<float>() + b * n * n, n, n), gi(g->data<float>() + b * n * n, n, n);
    Map(d + b * n * n, n, n) = -(yi.transpose() * gi * yi.transpose());
  }
  return absl::OkStatus();
}

// ---- cholesky ----

absl::Status CholeskyKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const int64_t n, SquareBatch(ctx, *x, "X"));
  const bool upper = ctx.Attr<bool>("upper");
  float* o = ctx.Output("Out")->mutable_data<float>(x->dims());
  for (int64_t b = 0; b < x->numel() / std::max<int64_t>(n * n, 1); ++b) {
    Eigen::LLT<Mat> llt(MapC(x->data<float>() + b * n * n, n, n));
    if (llt.info() != Eigen::Success) {
      return absl::InvalidArgumentError(absl::StrCat("cholesky: matrix ", b, " of X is not positive definite"));
    }
    const Mat l = llt.matrixL();
    Map(o + b * n * n, n, n) = upper ? Mat(l.transpose()) : l;
  }
  return absl::OkStatus();
}

absl::Status CholeskyGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_ASSIGN_OR_RETURN(const int64_t n, SquareBatch(ctx, *out, "Out"));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const bool upper = ctx.Attr<bool>("upper");
  float* d = dx->mutable_data<float>(out->dims());
  for (int64_t b = 0; b < out->numel() / std::max<int64_t>(n * n, 1); ++b) {
    const MapC o(out->data<float>() + b * n * n, n, n), gi(g->data<float>() + b * n * n, n, n);
    const Mat l = upper ? Mat(o.transpose()) : Mat(o);
    const Mat dl = upper ? Mat(gi.transpose()) : Mat(gi);
    Mat phi = (l.transpose() * dl).triangularView<Eigen::Lower>();
    phi.diagonal() *= 0.5f;
    const Mat linv = l.triangularView<Eigen::Lower>().solve(Mat::Identity(n, n));
    const Mat s = linv.transpose() * phi * linv;
    Map(d + b * n * n, n, n) = 0.5f * (s + s.transpose());
  }
  return absl::OkStatus();
}

// ---- logsumexp ----

struct Folding {
  std::vector<int64_t> out_of;  // per input element, its output element
  DDim out;
};

Folding FoldAxes(const ExecutionContext& ctx, const DDim& d) {
  std::vector<bool> fold(static_cast<size_t>(d.size()), ctx.Attr<bool>("reduce_all"));
  const auto axes = ctx.Attr<std::vector<int32_t>>("axis");
  if (axes.empty()) fold.assign(fold.size(), true);
  for (int a : axes) fold[static_cast<size_t>(a < 0 ? a + d.size() : a)] = true;
  Folding f;
  std::vector<int64_t> od;
  for (int k = 0; k < d.size(); ++k) {
    if (!fold[static_cast<size_t>(k)])
      od.push_back(d[k]);
    else if (ctx.Attr<bool>("keepdim"))
      od.push_back(1);
  }
  f.out = DDim(od);
  f.out_of.resize(static_cast<size_t>(d.numel()));
  for (int64_t e = 0; e < d.numel(); ++e) {
    int64_t rest = e, o = 0, stride = 1;
    for (int k = d.size() - 1; k >= 0; --k) {
      const int64_t i = rest % d[k];
      rest /= d[k];
      if (!fold[static_cast<size_t>(k)]) o += i * stride, stride *= d[k];
    }
    f.out_of[static_cast<size_t>(e)] = o;
  }
  return f;
}

template <bool kGrad>
absl::Status LogsumexpKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const Folding f = FoldAxes(ctx, x->dims());
  const float* xp = x->data<float>();
  if (!kGrad) {
    std::vector<double> top(static_cast<size_t>(f.out.numel()), -std::numeric_limits<double>::infinity());
    std::vector<double> sum(top.size(), 0);
    for (size_t e = 0; e < f.out_of.size(); ++e) top[f.out_of[e]] = std::max<double>(top[f.out_of[e]], xp[e]);
    for (size_t e = 0; e < f.out_of.size(); ++e) sum[f.out_of[e]] += std::exp(xp[e] - top[f.out_of[e]]);
    float* o = ctx.Output("Out")->mutable_data<float>(f.out);
    for (size_t i = 0; i < top.size(); ++i) o[i] = static_cast<float>(top[i] + std::log(sum[i]));
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  float* d = dx->mutable_data<float>(x->dims());
  for (size_t e = 0; e < f.out_of.size(); ++e) {
    d[e] = g->data<float>()[f.out_of[e]] * std::exp(xp[e] - out->data<float>()[f.out_of[e]]);
  }
  return absl::OkStatus();
}

// ---- dist ----

template <bool kGrad>
absl::Status DistKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  if (x->dims() != y->dims()) {
    return absl::UnimplementedError(absl::StrCat("dist: X", x->dims().ToString(), " and Y", y->dims().ToString(),
                                                 " differ in shape (Oar implements equal shapes)"));
  }
  const double p = ctx.Attr<float>("p");
  const float* xp = x->data<float>();
  const float* yp = y->data<float>();
  if (!kGrad) {
    double acc = std::isinf(p) && p < 0 ? std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < x->numel(); ++i) {
      const double v = std::abs(static_cast<double>(xp[i]) - yp[i]);
      if (std::isinf(p))
        acc = p > 0 ? std::max(acc, v) : std::min(acc, v);
      else if (p == 0)
        acc += v != 0;
      else
        acc += std::pow(v, p);
    }
    ctx.Output("Out")->mutable_data<float>(DDim{})[0] =
        static_cast<float>(std::isinf(p) || p == 0 ? acc : std::pow(acc, 1 / p));
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const double o = out->data<float>()[0], gy = g->data<float>()[0];
  Tensor* dx = ctx.Output(GradVarName("X"));
  Tensor* dy = ctx.Output(GradVarName("Y"));
  float* dxp = dx ? dx->mutable_data<float>(x->dims()) : nullptr;
  float* dyp = dy ? dy->mutable_data<float>(y->dims()) : nullptr;
  for (int64_t i = 0; i < x->numel(); ++i) {
    const double v = static_cast<double>(xp[i]) - yp[i], s = (v > 0) - (v < 0);
    double r = 0;
    if (o != 0 && p != 0)
      r = std::isinf(p) ? (std::abs(v) == o ? s * gy : 0) : s * std::pow(std::abs(v), p - 1) * gy / std::pow(o, p - 1);
    if (dxp) dxp[i] = static_cast<float>(r);
    if (dyp) dyp[i] = static_cast<float>(-r);
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterMatrixFuncOps(OpRegistry* r) {
  auto trace = [](OpInfo& i) -> OpInfo& {
    return i.Attr("offset", int32_t{0}).Attr("axis1", int32_t{0}).Attr("axis2", int32_t{1});
  };
  trace(r->Register("trace").Input("Input").Output("Out"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"Input"}, {}, {"Out"}, {"Input"}))
      .Kernel<float>(TraceKernel<false>);
  trace(r->Register("trace_grad").Input("Input").Input(GradVarName("Out")).Output(GradVarName("Input"), kDispensable))
      .SetInferShape(NoShapeInference)
      .Kernel<float>(TraceKernel<true>);
  r->Register("inverse")
      .NotInPlace()
      .Input("Input")
      .Output("Output")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({}, {"Output"}, {"Output"}, {"Input"}))
      .Kernel<float>(InverseKernel);
  r->Register("inverse_grad")
      .NotInPlace()
      .Input("Output")
      .Input(GradVarName("Output"))
      .Output(GradVarName("Input"), kDispensable)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(InverseGradKernel);
  r->Register("cholesky")
      .NotInPlace()
      .Input("X")
      .Output("Out")
      .Attr("upper", false)
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(GradOpMaker({}, {"Out"}, {"Out"}, {"X"}))
      .Kernel<float>(CholeskyKernel);
  r->Register("cholesky_grad")
      .NotInPlace()
      .Input("Out")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("upper", false)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(CholeskyGradKernel);
  auto lse = [](OpInfo& i) -> OpInfo& {
    return i.Attr("axis", std::vector<int32_t>{0}).Attr("keepdim", false).Attr("reduce_all", false);
  };
  lse(r->Register("logsumexp").Input("X").Output("Out"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X"}, {"Out"}, {"Out"}, {"X"}))
      .Kernel<float>(LogsumexpKernel<false>);
  lse(r->Register("logsumexp_grad")
          .Input("X")
          .Input("Out")
          .Input(GradVarName("Out"))
          .Output(GradVarName("X"), kDispensable))
      .SetInferShape(GradSameShapeAsX)
      .Kernel<float>(LogsumexpKernel<true>);
  r->Register("dist")
      .Input("X")
      .Input("Y")
      .Output("Out")
      .Attr("p", 2.0f)
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Y"}, {"Out"}, {"Out"}, {"X", "Y"}))
      .Kernel<float>(DistKernel<false>);
  r->Register("dist_grad")
      .Input("X")
      .Input("Y")
      .Input("Out")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .Attr("p", 2.0f)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(DistKernel<true>);
}

}  // namespace oar
