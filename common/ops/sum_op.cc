// sum: adds its X inputs, each a dense tensor or a SelectedRows (a sparse
// gradient). Dense output when any input is dense (sparse rows are added in);
// sparse output, rows and values concatenated, when every input is sparse.
// An input that was never written (a SelectedRows with no rows) adds nothing
// and says nothing about the shape. Tensor arrays (the gradients of arrays a
// loop wrote) add element by element, an empty element adding nothing.
#include <algorithm>

#include "common/base/tiled_sum.h"
#include "common/framework/op_registry.h"
#include "common/framework/selected_rows_util.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// Every input whose shape is known must have the first such input's shape.
absl::Status SumInferShape(InferShapeContext& ctx) {
  const size_t n = ctx.InputSize("X");
  size_t ref = n;
  DDim want;
  for (size_t i = 0; i < n; ++i) {
    const DDim d = ctx.InputDim("X", i);
    if (d.numel() < 0) continue;  // unknown: a build-time -1, or a sparse input not yet written
    if (ref == n) {
      ref = i;
      want = d;
    } else if (d != want) {
      return ctx.Error("input ", InputLabel(ctx.op(), "X", i), " has shape ", d.ToString(), ", expected ",
                       want.ToString(), " (the shape of ", InputLabel(ctx.op(), "X", ref), ")");
    }
  }
  if (ref == n) {
    // No input has a known shape. At run time every input is then an
    // unwritten sparse one and the kernel writes an empty SelectedRows.
    if (ctx.IsRuntime()) return absl::OkStatus();
    ref = 0;
    want = ctx.InputDim("X", 0);
  }
  ctx.SetOutputDim("Out", want);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X", ref));
  ctx.ShareLoD("X", "Out");
  return absl::OkStatus();
}

// Elements per row of a written SelectedRows.
int64_t RowWidth(const SelectedRows& s) { return s.value.numel() / static_cast<int64_t>(s.rows.size()); }

template <typename T>
absl::Status SumSparse(const ExecutionContext& ctx, const std::vector<const Variable*>& xs, Variable* out_var) {
  SelectedRows merged;
  merged.height = xs[0]->Get<SelectedRows>().height;
  int64_t total = 0, width = -1;
  for (size_t i = 0; i < xs.size(); ++i) {
    const SelectedRows& s = xs[i]->Get<SelectedRows>();
    if (s.rows.empty()) continue;
    if (width < 0) {
      width = RowWidth(s);
      merged.height = s.height;
    } else if (RowWidth(s) != width || s.height != merged.height) {
      return absl::InvalidArgumentError(absl::StrCat("sum: input ", InputLabel(ctx.op(), "X", i), " has ", s.height,
                                                     " rows of width ", RowWidth(s), ", expected ", merged.height,
                                                     " of width ", width));
    }
    merged.rows.insert(merged.rows.end(), s.rows.begin(), s.rows.end());
    total += static_cast<int64_t>(s.rows.size());
  }
  DDim d{total, std::max<int64_t>(width, 0)};
  if (width < 0) d = EmptyRowShape(xs[0]->Get<SelectedRows>());
  T* dst = merged.value.mutable_data<T>(d);
  for (const Variable* v : xs) {
    const SelectedRows& s = v->Get<SelectedRows>();
    if (s.rows.empty()) continue;
    std::copy(s.value.data<T>(), s.value.data<T>() + s.value.numel(), dst);
    dst += s.value.numel();
  }
  *out_var->GetMutable<SelectedRows>() = std::move(merged);
  return absl::OkStatus();
}

template <typename T>
absl::Status SumArrays(const ExecutionContext& ctx) {
  TensorList sum;
  for (size_t i = 0; i < ctx.InputSize("X"); ++i) {
    const Variable* v = ctx.InputVar("X", i);
    if (v == nullptr || !v->IsType<TensorList>()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sum: input ", InputLabel(ctx.op(), "X", i), " is not a tensor array, as the others are"));
    }
    const TensorList& xs = v->Get<TensorList>();
    if (sum.size() < xs.size()) sum.resize(xs.size());
    for (size_t k = 0; k < xs.size(); ++k) {
      const Tensor& x = xs[k];
      if (!x.initialized() || x.numel() == 0) continue;
      Tensor& acc = sum[k];
      if (!acc.initialized() || acc.numel() == 0) {
        acc.CopyFrom(x);
        continue;
      }
      if (acc.dims() != x.dims()) {
        return absl::InvalidArgumentError(absl::StrCat("sum: element ", k, " of ", InputLabel(ctx.op(), "X", i),
                                                       " has shape ", x.dims().ToString(), ", the others ",
                                                       acc.dims().ToString()));
      }
      OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", i, x));
      T* a = acc.data<T>();
      const T* b = x.data<T>();
      for (int64_t j = 0; j < x.numel(); ++j) a[j] += b[j];
    }
  }
  *ctx.OutputVar("Out")->GetMutable<TensorList>() = std::move(sum);
  return absl::OkStatus();
}

// x = x + sparse rows (GEO-SGD's pserver block, sum(block, block.delta)):
// the rows added where x lies, touching nothing else, as Paddle's in-place
// sum does. False (nothing done) when another input is dense or Out's
// buffer is shared or read-only (a Get's reply may still hold it: then Out
// takes a fresh buffer by the general path).
template <typename T>
absl::StatusOr<bool> AddRowsInPlace(const ExecutionContext& ctx, const std::vector<const Variable*>& xs, Tensor* out) {
  for (size_t i = 1; i < xs.size(); ++i) {
    if (!xs[i]->IsType<SelectedRows>() || xs[i] == xs[0]) return false;
  }
  if (out->BufferShared() || !out->Writable()) return false;
  const DDim dims = out->dims();
  T* acc = out->mutable_data<T>();
  for (size_t i = 1; i < xs.size(); ++i) {
    const SelectedRows& s = xs[i]->Get<SelectedRows>();
    if (s.rows.empty()) continue;
    const int64_t width = RowWidth(s);
    if (dims.size() == 0 || s.height != dims[0] || width * s.height != dims.numel()) {
      return absl::InvalidArgumentError(absl::StrCat("sum: sparse input ", InputLabel(ctx.op(), "X", i), " has ",
                                                     s.height, " rows of width ", width,
                                                     ", which does not cover X[0]'s shape ", dims.ToString()));
    }
    const T* p = s.value.data<T>();
    for (size_t r = 0; r < s.rows.size(); ++r) {
      T* row = acc + s.rows[r] * width;
      for (int64_t k = 0; k < width; ++k) row[k] += p[r * width + k];
    }
  }
  return true;
}

template <typename T>
absl::Status SumKernel(const ExecutionContext& ctx) {
  const size_t n = ctx.InputSize("X");
  if (n > 0 && ctx.InputVar("X", 0) != nullptr && ctx.InputVar("X", 0)->IsType<TensorList>()) {
    return SumArrays<T>(ctx);
  }
  std::vector<const Variable*> xs;
  const Tensor* first_dense = nullptr;
  for (size_t i = 0; i < n; ++i) {
    const Variable* v = ctx.InputVar("X", i);
    const bool dense_ok = v != nullptr && v->IsType<Tensor>() && v->Get<Tensor>().initialized();
    const bool sparse_ok = v != nullptr && v->IsType<SelectedRows>();
    if (!dense_ok && !sparse_ok) {
      return absl::InvalidArgumentError(absl::StrCat("sum: input ", InputLabel(ctx.op(), "X", i), " holds no tensor"));
    }
    if (sparse_ok) {
      const SelectedRows& s = v->Get<SelectedRows>();
      OAR_RETURN_IF_ERROR(CheckSelectedRows(s, "sum: X[" + std::to_string(i) + "]"));
      if (!s.rows.empty()) OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", i, s.value));
    } else {
      OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "X", i, v->Get<Tensor>()));
      if (first_dense == nullptr) first_dense = &v->Get<Tensor>();
    }
    xs.push_back(v);
  }
  Variable* out_var = ctx.OutputVar("Out");
  if (first_dense == nullptr) return SumSparse<T>(ctx, xs, out_var);

  if (ctx.InputVar("X", 0) == out_var && xs[0]->IsType<Tensor>()) {
    OAR_ASSIGN_OR_RETURN(bool done, AddRowsInPlace<T>(ctx, xs, out_var->GetMutable<Tensor>()));
    if (done) return absl::OkStatus();
  }
  // Shape inference checked every known shape against the others; the dense
  // inputs define Out's.
  const DDim dims = first_dense->dims();
  const int64_t numel = dims.numel();
  // Out may alias an input (x = x + y): then accumulate aside and copy (Out
  // is touched only after every input is read); else straight into Out, with
  // no allocation on this per-step path.
  const bool aliased = std::find(xs.begin(), xs.end(), out_var) != xs.end();
  const bool dense_only = std::all_of(xs.begin(), xs.end(), [](const Variable* v) { return v->IsType<Tensor>(); });
  std::vector<T> scratch;
  Tensor* out = nullptr;
  T* acc = nullptr;
  if (aliased) {
    scratch.assign(static_cast<size_t>(numel), T(0));
    acc = scratch.data();
  } else {
    out = ctx.Output("Out");
    out->Resize(dims);
    acc = out->mutable_data<T>();
    if (!dense_only) std::fill(acc, acc + numel, T(0));
  }
  if (dense_only) {  // each input read once (a pserver's merge at the barrier runs this)
    std::vector<const T*> in;
    for (const Variable* v : xs) in.push_back(v->Get<Tensor>().data<T>());
    SumTiled(in, 0, numel, acc);
    xs.clear();  // every input added
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    const Variable* v = xs[i];
    if (v->IsType<Tensor>()) {
      const T* p = v->Get<Tensor>().data<T>();
      for (int64_t j = 0; j < numel; ++j) acc[j] += p[j];
      continue;
    }
    const SelectedRows& s = v->Get<SelectedRows>();
    if (s.rows.empty()) continue;
    const int64_t width = RowWidth(s);
    if (dims.size() == 0 || s.height != dims[0] || width * s.height != numel) {
      return absl::InvalidArgumentError(
          absl::StrCat("sum: sparse input ", InputLabel(ctx.op(), "X", i), " has ", s.height, " rows of width ", width,
                       ", which does not cover the dense inputs' shape ", dims.ToString()));
    }
    const T* p = s.value.data<T>();
    for (size_t r = 0; r < s.rows.size(); ++r) {
      for (int64_t k = 0; k < width; ++k) acc[s.rows[r] * width + k] += p[r * width + k];
    }
  }
  if (aliased) {
    out = ctx.Output("Out");
    out->Resize(dims);
    std::copy(scratch.begin(), scratch.end(), out->mutable_data<T>());
  }
  return absl::OkStatus();
}

void SumVarType(const OpDesc& op, BlockDesc* block) {
  const std::vector<std::string>& xs = op.Input("X");
  const VarDesc* first = xs.empty() ? nullptr : block->FindVarRecursive(xs[0]);
  if (first != nullptr && first->type == paddle::framework::proto::VarType::LOD_TENSOR_ARRAY) {
    for (const auto& out : op.Output("Out")) block->Var(out)->type = first->type;
    return;
  }
  bool all_sparse = true;
  for (const auto& in : op.Input("X")) {
    const VarDesc* v = block->FindVarRecursive(in);
    all_sparse &= v != nullptr && v->type == paddle::framework::proto::VarType::SELECTED_ROWS;
  }
  for (const auto& out : op.Output("Out")) {
    block->Var(out)->type =
        all_sparse ? paddle::framework::proto::VarType::SELECTED_ROWS : paddle::framework::proto::VarType::LOD_TENSOR;
  }
}

std::vector<OpDesc> SumGradMaker(const OpDesc& fwd) {
  std::vector<OpDesc> ops;
  for (const auto& x : fwd.Input("X")) {
    OpDesc g;
    g.type = "scale";
    g.SetInput("X", {GradVarName(fwd.Output("Out")[0])});
    g.SetOutput("Out", {GradVarName(x)});
    g.SetAttr("scale", 1.0f);
    ops.push_back(std::move(g));
  }
  return ops;
}

}  // namespace

void RegisterSumOp(OpRegistry* r) {
  r->Register("sum")
      .Input("X", kDuplicable)
      .Output("Out")
      .Attr("use_mkldnn", false)
      .SetInferShape(SumInferShape)
      .SetGradMaker(SumGradMaker)
      .SetInferVarType(SumVarType)
      .Kernel<float>(SumKernel<float>)
      .Kernel<double>(SumKernel<double>)
      .Kernel<int64_t>(SumKernel<int64_t>);
}

}  // namespace oar
