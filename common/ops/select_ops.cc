// Selection ops of paddle.*, with Paddle's slots and gradients:
// masked_select (X's elements where Mask holds, flattened), index_select
// (slices along `dim` named by Index), index_sample (per row, the columns
// Index names), multiplex (row i from X[Ids[i]]) and meshgrid (each 1-D
// input broadcast along its own axis of the grid).
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

template <typename T, bool kGrad>
absl::Status MaskedSelectKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* mask, RequireInput(ctx, "Mask"));
  OAR_RETURN_IF_ERROR(RequireDtype<bool>(ctx, "Mask", *mask));
  if (mask->numel() != x->numel()) {
    return absl::UnimplementedError(absl::StrCat("masked_select: Mask", mask->dims().ToString(), " and X",
                                                 x->dims().ToString(), " differ (Oar implements equal shapes)"));
  }
  const bool* m = mask->data<bool>();
  if (!kGrad) {
    const int64_t n = std::count(m, m + mask->numel(), true);
    T* o = ctx.Output("Y")->mutable_data<T>(DDim{n});
    for (int64_t i = 0, j = 0; i < x->numel(); ++i) {
      if (m[i]) o[j++] = x->data<T>()[i];
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Y")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  T* d = dx->mutable_data<T>(x->dims());
  for (int64_t i = 0, j = 0; i < x->numel(); ++i) d[i] = m[i] ? g->data<T>()[j++] : T(0);
  return absl::OkStatus();
}

template <typename T, bool kGrad>
absl::Status IndexSelectKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const DDim& d = x->dims();
  int dim = ctx.Attr<int32_t>("dim");
  if (dim < 0) dim += d.size();
  if (dim < 0 || dim >= d.size())
    return absl::InvalidArgumentError(absl::StrCat("index_select: dim outside X", d.ToString()));
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> idx, IndexValues(ctx, "Index", d[dim]));
  const int64_t outer = d.Product(0, dim), inner = d.Product(dim + 1, d.size()), k = static_cast<int64_t>(idx.size());
  DDim od = d;
  od[dim] = k;
  if (!kGrad) {
    T* o = ctx.Output("Out")->mutable_data<T>(od);
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t j = 0; j < k; ++j)
        std::copy_n(x->data<T>() + (a * d[dim] + idx[j]) * inner, inner, o + (a * k + j) * inner);
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  T* dp = ZeroedGradOutput<T>(ctx, "X", d);
  if (dp == nullptr) return absl::OkStatus();
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t i = 0; i < inner; ++i)
        dp[(a * d[dim] + idx[j]) * inner + i] += g->data<T>()[(a * k + j) * inner + i];
    }
  }
  return absl::OkStatus();
}

template <typename T, bool kGrad>
absl::Status IndexSampleKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* index, RequireInput(ctx, "Index"));
  const DDim &d = x->dims(), &id = index->dims();
  if (d.size() != 2 || id.size() != 2 || d[0] != id[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("index_sample: X", d.ToString(), " and Index", id.ToString(), " must be [N, M] and [N, K]"));
  }
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> idx, IndexValues(ctx, "Index", d[1]));
  if (!kGrad) {
    T* o = ctx.Output("Out")->mutable_data<T>(id);
    for (int64_t i = 0; i < id[0]; ++i) {
      for (int64_t j = 0; j < id[1]; ++j) o[i * id[1] + j] = x->data<T>()[i * d[1] + idx[i * id[1] + j]];
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  T* dp = ZeroedGradOutput<T>(ctx, "X", d);
  if (dp == nullptr) return absl::OkStatus();
  for (int64_t i = 0; i < id[0]; ++i) {
    for (int64_t j = 0; j < id[1]; ++j) dp[i * d[1] + idx[i * id[1] + j]] += g->data<T>()[i * id[1] + j];
  }
  return absl::OkStatus();
}

template <typename T, bool kGrad>
absl::Status MultiplexKernel(const ExecutionContext& ctx) {
  const std::vector<const Tensor*> xs = ctx.MultiInput("X");
  if (xs.empty() || xs[0] == nullptr) return absl::InvalidArgumentError("multiplex: X is missing");
  const DDim d = xs[0]->dims();
  const int64_t rows = d.size() ? d[0] : 1, row = rows ? xs[0]->numel() / rows : 0;
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> ids, IndexValues(ctx, "Ids", static_cast<int64_t>(xs.size())));
  if (static_cast<int64_t>(ids.size()) != rows) {
    return absl::InvalidArgumentError(absl::StrCat("multiplex: ", ids.size(), " Ids for ", rows, " rows"));
  }
  for (const Tensor* t : xs) {
    if (t == nullptr || t->dims() != d) return absl::InvalidArgumentError("multiplex: every X must have X[0]'s shape");
  }
  if (!kGrad) {
    T* o = ctx.Output("Out")->mutable_data<T>(d);
    for (int64_t i = 0; i < rows; ++i)
      std::copy_n(xs[static_cast<size_t>(ids[i])]->data<T>() + i * row, row, o + i * row);
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  std::vector<Tensor*> dxs = ctx.MultiOutput(GradVarName("X"));
  for (size_t k = 0; k < dxs.size(); ++k) {
    if (dxs[k] == nullptr) continue;
    T* dp = dxs[k]->mutable_data<T>(d);
    for (int64_t i = 0; i < rows; ++i) {
      if (ids[i] == static_cast<int64_t>(k))
        std::copy_n(g->data<T>() + i * row, row, dp + i * row);
      else
        std::fill_n(dp + i * row, row, T(0));
    }
  }
  return absl::OkStatus();
}

template <typename T, bool kGrad>
absl::Status MeshgridKernel(const ExecutionContext& ctx) {
  const std::vector<const Tensor*> xs = ctx.MultiInput("X");
  std::vector<int64_t> shape;
  for (const Tensor* t : xs) {
    if (t == nullptr) return absl::InvalidArgumentError("meshgrid: an input is missing");
    shape.push_back(t->numel());
  }
  const DDim grid(shape);
  const int64_t n = grid.numel();
  const std::vector<Tensor*> outs = ctx.MultiOutput(kGrad ? GradVarName("X") : "Out");
  const std::vector<const Tensor*> gs = kGrad ? ctx.MultiInput(GradVarName("outputs")) : std::vector<const Tensor*>{};
  for (size_t k = 0; k < xs.size() && k < outs.size(); ++k) {
    if (outs[k] == nullptr) continue;
    const int64_t inner = grid.Product(static_cast<int>(k) + 1, grid.size());
    if (!kGrad) {
      T* o = outs[k]->mutable_data<T>(grid);
      for (int64_t e = 0; e < n; ++e) o[e] = xs[k]->data<T>()[(e / inner) % shape[k]];
      continue;
    }
    if (k >= gs.size() || gs[k] == nullptr)
      return absl::InvalidArgumentError("meshgrid_grad: an output gradient is missing");
    T* d = outs[k]->mutable_data<T>(xs[k]->dims());
    std::fill(d, d + xs[k]->numel(), T(0));
    for (int64_t e = 0; e < n; ++e) d[(e / inner) % shape[k]] += gs[k]->data<T>()[e];
  }
  return absl::OkStatus();
}

std::vector<OpDesc> MeshgridGradMaker(const OpDesc& fwd) {  // Paddle's slot: outputs@GRAD
  OpDesc g;
  g.type = "meshgrid_grad";
  g.SetInput("X", fwd.Input("X"));
  std::vector<std::string> og, xg;
  for (const std::string& o : fwd.Output("Out")) og.push_back(GradVarName(o));
  for (const std::string& x : fwd.Input("X")) xg.push_back(GradVarName(x));
  g.SetInput(GradVarName("outputs"), og);
  g.SetOutput(GradVarName("X"), xg);
  return {g};
}

#define OAR_FLOATS2(K, B) Kernel<float>(K<float, B>).Kernel<double>(K<double, B>)

}  // namespace

void RegisterSelectOps(OpRegistry* r) {
  r->Register("masked_select")
      .Input("X")
      .Input("Mask")
      .Output("Y")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Mask"}, {}, {"Y"}, {"X"}))
      .OAR_FLOATS2(MaskedSelectKernel, false);
  r->Register("masked_select_grad")
      .Input("X")
      .Input("Mask")
      .Input(GradVarName("Y"))
      .Output(GradVarName("X"), kDispensable)
      .SetInferShape(GradSameShapeAsX)
      .OAR_FLOATS2(MaskedSelectKernel, true);
  r->Register("index_select")
      .Input("X")
      .Input("Index", kReadAnywhere)
      .Output("Out")
      .Attr("dim", int32_t{0})
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Index"}, {}, {"Out"}, {"X"}))
      .OAR_FLOATS2(IndexSelectKernel, false);
  r->Register("index_select_grad")
      .Input("X")
      .Input("Index", kReadAnywhere)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("dim", int32_t{0})
      .SetInferShape(GradSameShapeAsX)
      .OAR_FLOATS2(IndexSelectKernel, true);
  r->Register("index_sample")
      .Input("X")
      .Input("Index", kReadAnywhere)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Index"}, {}, {"Out"}, {"X"}))
      .OAR_FLOATS2(IndexSampleKernel, false);
  r->Register("index_sample_grad")
      .Input("X")
      .Input("Index", kReadAnywhere)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .SetInferShape(GradSameShapeAsX)
      .OAR_FLOATS2(IndexSampleKernel, true);
  r->Register("multiplex")
      .Input("X", kDuplicable)
      .Input("Ids", kReadAnywhere)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Ids"}, {}, {"Out"}, {"X"}))
      .OAR_FLOATS2(MultiplexKernel, false);
  r->Register("multiplex_grad")
      .Input("X", kDuplicable)
      .Input("Ids", kReadAnywhere)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDuplicable | kDispensable)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(MultiplexKernel, true);
  r->Register("meshgrid")
      .Input("X", kDuplicable)
      .Output("Out", kDuplicable)
      .SetInferShape(NoShapeInference)
      .SetGradMaker(MeshgridGradMaker)
      .OAR_FLOATS2(MeshgridKernel, false);
  r->Register("meshgrid_grad")
      .Input("X", kDuplicable)
      .Input(GradVarName("outputs"), kDuplicable)
      .Output(GradVarName("X"), kDuplicable | kDispensable)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(MeshgridKernel, true);
}

#undef OAR_FLOATS2

}  // namespace oar
