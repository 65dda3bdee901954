// Products of paddle.* with Paddle's slots and gradients (float32): mv, dot
// (row-wise over a batch), bmm, addmm (Beta·Input + Alpha·X·Y), kron and
// cross (along `dim`, or the first axis of size 3). Matrix products go
// through blas.h's Gemm. trace, inverse, cholesky, logsumexp and dist are
// matrix_func_ops.cc.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/blas.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

absl::Status Shapes(const ExecutionContext& ctx, bool ok, const Tensor& a, const char* as, const Tensor& b,
                    const char* bs) {
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), as), a.dims().ToString(),
                                                 " and ", InputLabel(ctx.op(), bs), b.dims().ToString(),
                                                 " do not fit"));
}

// ---- bmm, mv, dot, addmm ----

// Batched C = op(A)·op(B) over `batch` [m, k]·[k, n] pairs.
void BatchGemm(int64_t batch, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
               const float* b, float beta, float* c) {
  for (int64_t i = 0; i < batch; ++i)
    Gemm<float>(ta, tb, m, n, k, alpha, a + i * m * k, b + i * k * n, beta, c + i * m * n);
}

absl::Status BmmKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  const DDim &a = x->dims(), &b = y->dims();
  OAR_RETURN_IF_ERROR(Shapes(ctx, a.size() == 3 && b.size() == 3 && a[0] == b[0] && a[2] == b[1], *x, "X", *y, "Y"));
  BatchGemm(a[0], false, false, a[1], b[2], a[2], 1, x->data<float>(), y->data<float>(), 0,
            ctx.Output("Out")->mutable_data<float>(DDim{a[0], a[1], b[2]}));
  return absl::OkStatus();
}

absl::Status BmmGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const DDim &a = x->dims(), &b = y->dims();
  const int64_t bs = a[0], m = a[1], k = a[2], n = b[2];
  if (Tensor* dx = ctx.Output(GradVarName("X"))) {  // dX = dOut·Yᵀ
    float* d = dx->mutable_data<float>(a);
    for (int64_t i = 0; i < bs; ++i)
      Gemm<float>(false, true, m, k, n, 1, g->data<float>() + i * m * n, y->data<float>() + i * k * n, 0,
                  d + i * m * k);
  }
  if (Tensor* dy = ctx.Output(GradVarName("Y"))) {  // dY = Xᵀ·dOut
    float* d = dy->mutable_data<float>(b);
    for (int64_t i = 0; i < bs; ++i)
      Gemm<float>(true, false, k, n, m, 1, x->data<float>() + i * m * k, g->data<float>() + i * m * n, 0,
                  d + i * k * n);
  }
  return absl::OkStatus();
}

absl::Status MvKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* v, RequireInput(ctx, "Vec"));
  const DDim& a = x->dims();
  OAR_RETURN_IF_ERROR(Shapes(ctx, a.size() == 2 && v->numel() == a[1], *x, "X", *v, "Vec"));
  Gemm<float>(false, false, a[0], 1, a[1], 1, x->data<float>(), v->data<float>(), 0,
              ctx.Output("Out")->mutable_data<float>(DDim{a[0]}));
  return absl::OkStatus();
}

absl::Status MvGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* v, RequireInput(ctx, "Vec"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const int64_t m = x->dims()[0], n = x->dims()[1];
  if (Tensor* dx = ctx.Output(GradVarName("X"))) {  // outer product dOut·Vecᵀ
    Gemm<float>(false, false, m, n, 1, 1, g->data<float>(), v->data<float>(), 0, dx->mutable_data<float>(x->dims()));
  }
  if (Tensor* dv = ctx.Output(GradVarName("Vec"))) {
    Gemm<float>(true, false, n, 1, m, 1, x->data<float>(), g->data<float>(), 0, dv->mutable_data<float>(v->dims()));
  }
  return absl::OkStatus();
}

// dot: the last axis summed; X and Y [.., n] → [..].
template <bool kGrad>
absl::Status DotKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_RETURN_IF_ERROR(Shapes(ctx, x->dims() == y->dims() && x->dims().size() >= 1, *x, "X", *y, "Y"));
  const DDim& d = x->dims();
  const int64_t n = d[d.size() - 1], rows = n ? x->numel() / n : 0;
  const float* xp = x->data<float>();
  const float* yp = y->data<float>();
  if (!kGrad) {
    std::vector<int64_t> od(d.begin(), d.end() - 1);
    float* o = ctx.Output("Out")->mutable_data<float>(DDim(od));
    for (int64_t r = 0; r < rows; ++r) {
      float s = 0;
      for (int64_t i = 0; i < n; ++i) s += xp[r * n + i] * yp[r * n + i];
      o[r] = s;
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const float* gp = g->data<float>();
  Tensor* dx = ctx.Output(GradVarName("X"));
  Tensor* dy = ctx.Output(GradVarName("Y"));
  float* dxp = dx ? dx->mutable_data<float>(d) : nullptr;
  float* dyp = dy ? dy->mutable_data<float>(d) : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      if (dxp) dxp[r * n + i] = gp[r] * yp[r * n + i];
      if (dyp) dyp[r * n + i] = gp[r] * xp[r * n + i];
    }
  }
  return absl::OkStatus();
}

template <bool kGrad>
absl::Status AddmmKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  const int64_t m = x->dims()[0], k = x->dims()[1], n = y->dims()[1];
  OAR_RETURN_IF_ERROR(
      Shapes(ctx, x->dims().size() == 2 && y->dims().size() == 2 && y->dims()[0] == k, *x, "X", *y, "Y"));
  const float alpha = ctx.Attr<float>("Alpha"), beta = ctx.Attr<float>("Beta");
  // Input broadcasts over the rows ([n] or [1, n]) or is [m, n].
  const bool row = in->numel() == n && m != 1;
  OAR_RETURN_IF_ERROR(Shapes(ctx, in->numel() == m * n || row, *in, "Input", *x, "X"));
  if (!kGrad) {
    float* o = ctx.Output("Out")->mutable_data<float>(DDim{m, n});
    for (int64_t i = 0; i < m * n; ++i) o[i] = beta * in->data<float>()[row ? i % n : i];
    Gemm<float>(false, false, m, n, k, alpha, x->data<float>(), y->data<float>(), 1, o);
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const float* gp = g->data<float>();
  if (Tensor* di = ctx.Output(GradVarName("Input"))) {
    float* d = di->mutable_data<float>(in->dims());
    std::fill(d, d + in->numel(), 0.f);
    for (int64_t i = 0; i < m * n; ++i) d[row ? i % n : i] += beta * gp[i];
  }
  if (Tensor* dx = ctx.Output(GradVarName("X"))) {
    Gemm<float>(false, true, m, k, n, alpha, gp, y->data<float>(), 0, dx->mutable_data<float>(x->dims()));
  }
  if (Tensor* dy = ctx.Output(GradVarName("Y"))) {
    Gemm<float>(true, false, k, n, m, alpha, x->data<float>(), gp, 0, dy->mutable_data<float>(y->dims()));
  }
  return absl::OkStatus();
}

// ---- kron (same rank): Out[i·b + j] = X[i]·Y[j] per dimension ----

template <bool kGrad>
absl::Status KronKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  const DDim &a = x->dims(), &b = y->dims();
  OAR_RETURN_IF_ERROR(Shapes(ctx, a.size() == b.size(), *x, "X", *y, "Y"));
  DDim od = a;
  for (int d = 0; d < a.size(); ++d) od[d] = a[d] * b[d];
  const float* xp = x->data<float>();
  const float* yp = y->data<float>();
  const float* gp = nullptr;
  float *o = nullptr, *dx = nullptr, *dy = nullptr;
  if (!kGrad) {
    o = ctx.Output("Out")->mutable_data<float>(od);
  } else {
    OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
    gp = g->data<float>();
    if (Tensor* t = ctx.Output(GradVarName("X"))) dx = t->mutable_data<float>(a), std::fill(dx, dx + x->numel(), 0.f);
    if (Tensor* t = ctx.Output(GradVarName("Y"))) dy = t->mutable_data<float>(b), std::fill(dy, dy + y->numel(), 0.f);
  }
  for (int64_t e = 0; e < od.numel(); ++e) {
    int64_t rest = e, xi = 0, yi = 0, xs = 1, ys = 1;
    for (int d = od.size() - 1; d >= 0; --d) {
      const int64_t c = rest % od[d];
      rest /= od[d];
      xi += (c / b[d]) * xs, yi += (c % b[d]) * ys;
      xs *= a[d], ys *= b[d];
    }
    if (!kGrad) {
      o[e] = xp[xi] * yp[yi];
    } else {
      if (dx) dx[xi] += gp[e] * yp[yi];
      if (dy) dy[yi] += gp[e] * xp[xi];
    }
  }
  return absl::OkStatus();
}

// ---- cross: 3-vectors along `dim` ----

template <bool kGrad>
absl::Status CrossKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  const DDim& d = x->dims();
  int dim = ctx.Attr<int32_t>("dim");
  if (dim == 9) {  // DefaultDim: the first axis of size 3
    dim = -1;
    for (int i = 0; i < d.size() && dim < 0; ++i) dim = d[i] == 3 ? i : -1;
  } else if (dim < 0) {
    dim += d.size();
  }
  OAR_RETURN_IF_ERROR(
      Shapes(ctx, x->dims() == y->dims() && dim >= 0 && dim < d.size() && d[dim] == 3, *x, "X", *y, "Y"));
  const int64_t inner = d.Product(dim + 1, d.size()), outer = d.Product(0, dim);
  const float* xp = x->data<float>();
  const float* yp = y->data<float>();
  auto cross = [](const float* u, const float* v, int64_t s, float* out) {
    out[0] = u[s] * v[2 * s] - u[2 * s] * v[s];
    out[s] = u[2 * s] * v[0] - u[0] * v[2 * s];
    out[2 * s] = u[0] * v[s] - u[s] * v[0];
  };
  if (!kGrad) {
    float* o = ctx.Output("Out")->mutable_data<float>(d);
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t i = 0; i < inner; ++i)
        cross(xp + a * 3 * inner + i, yp + a * 3 * inner + i, inner, o + a * 3 * inner + i);
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const float* gp = g->data<float>();
  Tensor* dx = ctx.Output(GradVarName("X"));
  Tensor* dy = ctx.Output(GradVarName("Y"));
  float* dxp = dx ? dx->mutable_data<float>(d) : nullptr;
  float* dyp = dy ? dy->mutable_data<float>(d) : nullptr;
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t at = a * 3 * inner + i;
      if (dxp) cross(yp + at, gp + at, inner, dxp + at);  // dX = Y × dOut
      if (dyp) cross(gp + at, xp + at, inner, dyp + at);  // dY = dOut × X
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterLinalgOps(OpRegistry* r) {
  auto grad_of = [](std::vector<std::string> ins, std::vector<std::string> grads) {
    return GradOpMaker(std::move(ins), {}, {"Out"}, std::move(grads));
  };
  r->Register("bmm")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(grad_of({"X", "Y"}, {"X", "Y"}))
      .Kernel<float>(BmmKernel);
  r->Register("bmm_grad")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(BmmGradKernel);
  r->Register("mv")
      .NotInPlace()
      .Input("X")
      .Input("Vec")
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(grad_of({"X", "Vec"}, {"X", "Vec"}))
      .Kernel<float>(MvKernel);
  r->Register("mv_grad")
      .NotInPlace()
      .Input("X")
      .Input("Vec")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Vec"), kDispensable)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(MvGradKernel);
  r->Register("dot")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(grad_of({"X", "Y"}, {"X", "Y"}))
      .Kernel<float>(DotKernel<false>);
  r->Register("dot_grad")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(DotKernel<true>);
  r->Register("addmm")
      .NotInPlace()
      .Input("Input")
      .Input("X")
      .Input("Y")
      .Output("Out")
      .Attr("Alpha", 1.0f)
      .Attr("Beta", 1.0f)
      .SetInferShape(NoShapeInference)
      .SetGradMaker(grad_of({"Input", "X", "Y"}, {"Input", "X", "Y"}))
      .Kernel<float>(AddmmKernel<false>);
  r->Register("addmm_grad")
      .NotInPlace()
      .Input("Input")
      .Input("X")
      .Input("Y")
      .Input(GradVarName("Out"))
      .Output(GradVarName("Input"), kDispensable)
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .Attr("Alpha", 1.0f)
      .Attr("Beta", 1.0f)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(AddmmKernel<true>);
  r->Register("kron")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(grad_of({"X", "Y"}, {"X", "Y"}))
      .Kernel<float>(KronKernel<false>);
  r->Register("kron_grad")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(KronKernel<true>);
  r->Register("cross")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Output("Out")
      .Attr("dim", int32_t{9})
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(grad_of({"X", "Y"}, {"X", "Y"}))
      .Kernel<float>(CrossKernel<false>);
  r->Register("cross_grad")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .Attr("dim", int32_t{9})
      .SetInferShape(NoShapeInference)
      .Kernel<float>(CrossKernel<true>);
}

}  // namespace oar
