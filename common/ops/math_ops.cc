// mul and matmul with their gradients; every product goes through Gemm.
#include <cstring>

#include "common/base/blas.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// ---- mul: Out = flatten(X, x_num_col_dims) · flatten(Y, y_num_col_dims) ----

// Out's shape: X's leading x_num_col_dims dimensions, then Y's after its
// y_num_col_dims. X's flattened columns must equal Y's flattened rows, zero
// included (an unknown, -1, build-time size is not compared).
absl::StatusOr<DDim> MulOutDims(const InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X"), y = ctx.InputDim("Y");
  int xn = ctx.Attr<int32_t>("x_num_col_dims"), yn = ctx.Attr<int32_t>("y_num_col_dims");
  if (xn < 1 || xn >= x.size() || yn < 1 || yn >= y.size()) {
    return ctx.Error("x_num_col_dims=", xn, " / y_num_col_dims=", yn, " out of range for X", x.ToString(), " and Y",
                     y.ToString());
  }
  int64_t xk = x.Product(xn, x.size()), yk = y.Product(0, yn);
  if (xk >= 0 && yk >= 0 && xk != yk) {
    return ctx.Error("X ('", ctx.op().Input("X")[0], "')", x.ToString(), " flattens to ", xk, " columns but Y ('",
                     ctx.op().Input("Y")[0], "')", y.ToString(), " to ", yk, " rows");
  }
  DDim out;
  for (int i = 0; i < xn; ++i) out.push_back(x[i]);
  for (int i = yn; i < y.size(); ++i) out.push_back(y[i]);
  return out;
}

absl::Status MulInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, MulOutDims(ctx));
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  ctx.ShareLoD("X", "Out");
  return absl::OkStatus();
}

// X, Y (and Out@GRAD for the grad) in the kernel's dtype T.
template <typename T>
absl::Status RequireOperandDtypes(const ExecutionContext& ctx, const Tensor& x, const Tensor& y,
                                  const Tensor* dout = nullptr) {
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", 0, x));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Y", 0, y));
  if (dout != nullptr) OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *dout));
  return absl::OkStatus();
}

template <typename T>
absl::Status MulKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_RETURN_IF_ERROR(RequireOperandDtypes<T>(ctx, *x, *y));
  Tensor* out = ctx.Output("Out");
  DDim x2 = x->dims().FlattenTo2D(ctx.Attr<int32_t>("x_num_col_dims"));
  DDim y2 = y->dims().FlattenTo2D(ctx.Attr<int32_t>("y_num_col_dims"));
  Gemm<T>(false, false, x2[0], y2[1], x2[1], T(1), x->data<T>(), y->data<T>(), T(0), out->mutable_data<T>());
  return absl::OkStatus();
}

absl::Status MulGradInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, MulOutDims(ctx));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Out"), out));
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim("X"));
  ctx.SetOutputDim(GradVarName("Y"), ctx.InputDim("Y"));
  return absl::OkStatus();
}

template <typename T>
absl::Status MulGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dout, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireOperandDtypes<T>(ctx, *x, *y, dout));
  DDim x2 = x->dims().FlattenTo2D(ctx.Attr<int32_t>("x_num_col_dims"));
  DDim y2 = y->dims().FlattenTo2D(ctx.Attr<int32_t>("y_num_col_dims"));
  int64_t m = x2[0], k = x2[1], n = y2[1];
  if (Tensor* dx = ctx.Output(GradVarName("X"))) {  // dX = dOut · Yᵀ
    Gemm<T>(false, true, m, k, n, T(1), dout->data<T>(), y->data<T>(), T(0), dx->mutable_data<T>());
  }
  if (Tensor* dy = ctx.Output(GradVarName("Y"))) {  // dY = Xᵀ · dOut
    Gemm<T>(true, false, k, n, m, T(1), x->data<T>(), dout->data<T>(), T(0), dy->mutable_data<T>());
  }
  return absl::OkStatus();
}

// ---- matmul: Out = alpha · op(X) · op(Y), batched over leading dims ----

struct MatDims {
  int64_t batch, rows, cols;  // of op(M)
};

MatDims OpDims(const DDim& d, bool trans) {
  int r = d.size();
  int64_t a = d[r - 2], b = d[r - 1];
  return {d.Product(0, r - 2), trans ? b : a, trans ? a : b};
}

// The operands as matrices: a vector X of D is the row [1, D] and a vector
// Y the column [D, 1], transposed or not by the flags (matmul_v2, Paddle
// 2.x, ignores trans_x/trans_y on a vector). Out drops the dimension a
// vector gained: matmul where it is 1 (Fluid's rule, so a transposed vector
// X of D gives D rows that stay), matmul_v2 always; Out of two vectors is
// [1] (matmul) or a scalar [] (matmul_v2). The promoted shapes hold the data
// as the originals do, so kernels use them directly.
struct MatmulOperands {
  DDim x, y;
  bool tx = false, ty = false;
  bool x_vector = false, y_vector = false;
  bool v2 = false;
};

template <typename Ctx>
MatmulOperands Operands(const Ctx& ctx, const DDim& x, const DDim& y) {
  MatmulOperands o{x, y};
  o.v2 = ctx.op().type.rfind("matmul_v2", 0) == 0;
  o.tx = ctx.template Attr<bool>(o.v2 ? "trans_x" : "transpose_X");
  o.ty = ctx.template Attr<bool>(o.v2 ? "trans_y" : "transpose_Y");
  o.x_vector = x.size() == 1;
  o.y_vector = y.size() == 1;
  if (o.x_vector) {
    o.x = DDim{1, x[0]};
    o.tx = o.tx && !o.v2;
  }
  if (o.y_vector) {
    o.y = DDim{y[0], 1};
    o.ty = o.ty && !o.v2;
  }
  return o;
}

// Out's shape: the leading (batch) dimensions of the higher-rank operand,
// then op(X)'s rows and op(Y)'s columns. Inner and batch sizes must agree
// exactly, zero included (a side of rank 2 broadcasts over the batch).
absl::StatusOr<DDim> MatmulOutDims(const InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X"), y = ctx.InputDim("Y");
  if (x.size() < 1 || y.size() < 1) {
    return ctx.Error("X", x.ToString(), " and Y", y.ToString(), " must be at least 1-D");
  }
  const MatmulOperands o = Operands(ctx, x, y);
  MatDims a = OpDims(o.x, o.tx), b = OpDims(o.y, o.ty);
  if (a.cols >= 0 && b.rows >= 0 && a.cols != b.rows) {
    return ctx.Error("inner dimensions differ: X", x.ToString(), " gives ", a.cols, ", Y", y.ToString(), " gives ",
                     b.rows);
  }
  if (o.x.size() > 2 && o.y.size() > 2 && a.batch >= 0 && b.batch >= 0 && a.batch != b.batch) {
    return ctx.Error("batch dimensions differ: X", x.ToString(), ", Y", y.ToString());
  }
  const DDim& lead = o.x.size() >= o.y.size() ? o.x : o.y;
  DDim out;
  for (int i = 0; i < lead.size() - 2; ++i) out.push_back(lead[i]);
  if (!(o.x_vector && (o.v2 || a.rows == 1))) out.push_back(a.rows);
  if (!(o.y_vector && (o.v2 || b.cols == 1))) out.push_back(b.cols);
  if (out.size() == 0 && !o.v2) out.push_back(1);
  return out;
}

absl::Status MatmulInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, MatmulOutDims(ctx));
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  return absl::OkStatus();
}

// C_i = alpha · op(A_i) · op(B_i) for each batch i; a side with batch 1 is
// broadcast. With `accumulate_a/b`, results for a broadcast output are summed.
template <typename T>
void BatchedGemm(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_batch,
                 const T* b, int64_t b_batch, T* c, int64_t c_batch) {
  for (int64_t i = 0; i < batch; ++i) {
    T beta = (c_batch == 1 && i > 0) ? T(1) : T(0);
    Gemm<T>(ta, tb, m, n, k, alpha, a + (a_batch == 1 ? 0 : i * m * k), b + (b_batch == 1 ? 0 : i * k * n), beta,
            c + (c_batch == 1 ? 0 : i * m * n));
  }
}

template <typename T>
absl::Status MatmulKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_RETURN_IF_ERROR(RequireOperandDtypes<T>(ctx, *x, *y));
  const MatmulOperands o = Operands(ctx, x->dims(), y->dims());
  const bool tx = o.tx, ty = o.ty;
  MatDims a = OpDims(o.x, tx), b = OpDims(o.y, ty);
  int64_t batch = std::max(a.batch, b.batch);
  T* out = ctx.Output("Out")->mutable_data<T>();
  BatchedGemm<T>(tx, ty, batch, a.rows, b.cols, a.cols, T(ctx.Attr<float>("alpha")), x->data<T>(), a.batch,
                 y->data<T>(), b.batch, out, batch);
  return absl::OkStatus();
}

absl::Status MatmulGradInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, MatmulOutDims(ctx));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Out"), out));
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim("X"));
  ctx.SetOutputDim(GradVarName("Y"), ctx.InputDim("Y"));
  return absl::OkStatus();
}

template <typename T>
absl::Status MatmulGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dout, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireOperandDtypes<T>(ctx, *x, *y, dout));
  const MatmulOperands o = Operands(ctx, x->dims(), y->dims());
  const bool tx = o.tx, ty = o.ty;
  T alpha = T(ctx.Attr<float>("alpha"));
  MatDims a = OpDims(o.x, tx), b = OpDims(o.y, ty);
  int64_t batch = std::max(a.batch, b.batch), m = a.rows, k = a.cols, n = b.cols;
  const T* g = dout->data<T>();
  // X is stored [m,k] (or [k,m] when transposed); Y is [k,n] (or [n,k]).
  if (Tensor* dx = ctx.Output(GradVarName("X"))) {
    T* p = dx->mutable_data<T>();
    if (!tx) {  // dX[m,k] = dO · op(Y)ᵀ
      BatchedGemm<T>(false, !ty, batch, m, k, n, alpha, g, batch, y->data<T>(), b.batch, p, a.batch);
    } else {  // dX[k,m] = op(Y) · dOᵀ
      BatchedGemm<T>(ty, true, batch, k, m, n, alpha, y->data<T>(), b.batch, g, batch, p, a.batch);
    }
  }
  if (Tensor* dy = ctx.Output(GradVarName("Y"))) {
    T* p = dy->mutable_data<T>();
    if (!ty) {  // dY[k,n] = op(X)ᵀ · dO
      BatchedGemm<T>(!tx, false, batch, k, n, m, alpha, x->data<T>(), a.batch, g, batch, p, b.batch);
    } else {  // dY[n,k] = dOᵀ · op(X)
      BatchedGemm<T>(true, tx, batch, n, k, m, alpha, g, batch, x->data<T>(), a.batch, p, b.batch);
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterMathOps(OpRegistry* r) {
  r->Register("mul")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Output("Out")
      .Attr("x_num_col_dims", int32_t{1})
      .Attr("y_num_col_dims", int32_t{1})
      .SetInferShape(MulInferShape)
      .SetGradMaker(GradOpMaker({"X", "Y"}, {}, {"Out"}, {"X", "Y"}))
      .Kernel<float>(MulKernel<float>)
      .Kernel<double>(MulKernel<double>);
  r->Register("mul_grad")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Input("Out", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .Attr("x_num_col_dims", int32_t{1})
      .Attr("y_num_col_dims", int32_t{1})
      .SetInferShape(MulGradInferShape)
      .Kernel<float>(MulGradKernel<float>)
      .Kernel<double>(MulGradKernel<double>);

  r->Register("matmul")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Output("Out")
      .Attr("transpose_X", false)
      .Attr("transpose_Y", false)
      .Attr("alpha", 1.0f)
      .SetInferShape(MatmulInferShape)
      .SetGradMaker(GradOpMaker({"X", "Y"}, {}, {"Out"}, {"X", "Y"}))
      .Kernel<float>(MatmulKernel<float>)
      .Kernel<double>(MatmulKernel<double>);
  r->Register("matmul_grad")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .Attr("transpose_X", false)
      .Attr("transpose_Y", false)
      .Attr("alpha", 1.0f)
      .SetInferShape(MatmulGradInferShape)
      .Kernel<float>(MatmulGradKernel<float>)
      .Kernel<double>(MatmulGradKernel<double>);
  r->Register("matmul_v2")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Output("Out")
      .Attr("trans_x", false)
      .Attr("trans_y", false)
      .Attr("alpha", 1.0f)
      .Implements("alpha", {1.0f})
      .SetInferShape(MatmulInferShape)
      .SetGradMaker(GradOpMaker({"X", "Y"}, {}, {"Out"}, {"X", "Y"}))
      .Kernel<float>(MatmulKernel<float>)
      .Kernel<double>(MatmulKernel<double>);
  r->Register("matmul_v2_grad")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .Attr("trans_x", false)
      .Attr("trans_y", false)
      .Attr("alpha", 1.0f)
      .Implements("alpha", {1.0f})
      .SetInferShape(MatmulGradInferShape)
      .Kernel<float>(MatmulGradKernel<float>)
      .Kernel<double>(MatmulGradKernel<double>);
}

}  // namespace oar
