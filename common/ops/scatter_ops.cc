// Scatter and N-d gather, as Paddle writes them, with gradients: scatter
// (rows of X replaced by Updates at Ids, or, overwrite=false, those rows
// zeroed and Updates added; its X gradient is Out@GRAD with those rows
// zeroed, its Updates gradient those rows), gather_nd (X's slices named by
// the last axis of Index) and scatter_nd_add (X plus Updates added at
// Index), each the other's adjoint.
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

// Index [..., K] into X: the offset of each slice and the slice's size.
struct NdIndex {
  std::vector<int64_t> offsets;
  int64_t slice = 1;
  DDim gathered;  // Index's leading dimensions, then X's trailing ones
};

absl::StatusOr<NdIndex> ReadNdIndex(const ExecutionContext& ctx, const DDim& x) {
  OAR_ASSIGN_OR_RETURN(const Tensor* index, RequireInput(ctx, "Index"));
  const DDim& id = index->dims();
  const int k = id.size() == 0 ? 0 : static_cast<int>(id[id.size() - 1]);
  if (id.size() == 0 || k > x.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": Index", id.ToString(), " does not index X", x.ToString()));
  }
  NdIndex r;
  r.slice = x.Product(k, x.size());
  std::vector<int64_t> g;
  for (int d = 0; d + 1 < id.size(); ++d) g.push_back(id[d]);
  for (int d = k; d < x.size(); ++d) g.push_back(x[d]);
  r.gathered = DDim(g);
  const int64_t rows = k == 0 ? index->numel() : index->numel() / k;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t off = 0;
    for (int j = 0; j < k; ++j) {
      const int64_t v =
          index->dtype() == DataType::kInt32 ? index->data<int32_t>()[i * k + j] : index->data<int64_t>()[i * k + j];
      if (v < -x[j] || v >= x[j]) {
        return absl::InvalidArgumentError(
            absl::StrCat(ctx.op().type, ": Index holds ", v, " for dimension ", j, " of X", x.ToString()));
      }
      off = off * x[j] + (v < 0 ? v + x[j] : v);
    }
    r.offsets.push_back(off * r.slice);
  }
  return r;
}

template <typename T>
absl::Status GatherNdKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const NdIndex ix, ReadNdIndex(ctx, x->dims()));
  const T* xp = x->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(ix.gathered);
  for (size_t i = 0; i < ix.offsets.size(); ++i) std::copy_n(xp + ix.offsets[i], ix.slice, o + i * ix.slice);
  return absl::OkStatus();
}

template <typename T>
absl::Status GatherNdGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_ASSIGN_OR_RETURN(const NdIndex ix, ReadNdIndex(ctx, x->dims()));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const T* gp = g->data<T>();
  T* d = dx->mutable_data<T>(x->dims());
  std::fill(d, d + dx->numel(), T(0));
  for (size_t i = 0; i < ix.offsets.size(); ++i) {
    for (int64_t j = 0; j < ix.slice; ++j) d[ix.offsets[i] + j] += gp[i * ix.slice + j];
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ScatterNdAddKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* u, RequireInput(ctx, "Updates"));
  OAR_ASSIGN_OR_RETURN(const NdIndex ix, ReadNdIndex(ctx, x->dims()));
  if (u->numel() != static_cast<int64_t>(ix.offsets.size()) * ix.slice) {
    return absl::InvalidArgumentError(
        absl::StrCat("scatter_nd_add: Updates", u->dims().ToString(), " must be ", ix.gathered.ToString()));
  }
  const std::vector<T> xs(x->data<T>(), x->data<T>() + x->numel());  // Out may be X
  const T* up = u->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(x->dims());
  std::copy(xs.begin(), xs.end(), o);
  for (size_t i = 0; i < ix.offsets.size(); ++i) {
    for (int64_t j = 0; j < ix.slice; ++j) o[ix.offsets[i] + j] += up[i * ix.slice + j];
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ScatterNdAddGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_ASSIGN_OR_RETURN(const NdIndex ix, ReadNdIndex(ctx, g->dims()));
  const T* gp = g->data<T>();
  if (Tensor* dx = ctx.Output(GradVarName("X"))) std::copy_n(gp, g->numel(), dx->mutable_data<T>(g->dims()));
  if (Tensor* du = ctx.Output(GradVarName("Updates"))) {
    T* d = du->mutable_data<T>(ix.gathered);
    for (size_t i = 0; i < ix.offsets.size(); ++i) std::copy_n(gp + ix.offsets[i], ix.slice, d + i * ix.slice);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ScatterKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* u, RequireInput(ctx, "Updates"));
  const int64_t rows = x->dims().size() ? x->dims()[0] : 1, row = rows ? x->numel() / rows : 0;
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> ids, IndexValues(ctx, "Ids", rows));
  if (u->numel() != static_cast<int64_t>(ids.size()) * row) {
    return absl::InvalidArgumentError(absl::StrCat("scatter: Updates", u->dims().ToString(), " must hold ", ids.size(),
                                                   " rows of X", x->dims().ToString()));
  }
  const std::vector<T> xs(x->data<T>(), x->data<T>() + x->numel());
  const T* up = u->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(x->dims());
  std::copy(xs.begin(), xs.end(), o);
  const bool overwrite = ctx.Attr<bool>("overwrite");
  if (!overwrite) {
    for (int64_t id : ids) std::fill_n(o + id * row, row, T(0));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t j = 0; j < row; ++j) {
      T& dst = o[ids[i] * row + j];
      dst = overwrite ? up[static_cast<int64_t>(i) * row + j] : dst + up[static_cast<int64_t>(i) * row + j];
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ScatterGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const int64_t rows = g->dims().size() ? g->dims()[0] : 1, row = rows ? g->numel() / rows : 0;
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> ids, IndexValues(ctx, "Ids", rows));
  const T* gp = g->data<T>();
  if (Tensor* dx = ctx.Output(GradVarName("X"))) {
    T* d = dx->mutable_data<T>(g->dims());
    std::copy_n(gp, g->numel(), d);
    for (int64_t id : ids) std::fill_n(d + id * row, row, T(0));
  }
  if (Tensor* du = ctx.Output(GradVarName("Updates"))) {
    const Tensor* u = ctx.Input("Updates");
    T* d = du->mutable_data<T>(u ? u->dims() : DDim{static_cast<int64_t>(ids.size()), row});
    for (size_t i = 0; i < ids.size(); ++i) std::copy_n(gp + ids[i] * row, row, d + static_cast<int64_t>(i) * row);
  }
  return absl::OkStatus();
}

#define OAR_FLOATS(K) Kernel<float>(K<float>).Kernel<double>(K<double>)

}  // namespace

void RegisterScatterOps(OpRegistry* r) {
  r->Register("gather_nd")
      .Input("X")
      .Input("Index", kReadAnywhere)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Index"}, {}, {"Out"}, {"X"}))
      .OAR_FLOATS(GatherNdKernel);
  r->Register("gather_nd_grad")
      .Input("X")
      .Input("Index", kReadAnywhere)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .SetInferShape(GradSameShapeAsX)
      .OAR_FLOATS(GatherNdGradKernel);
  r->Register("scatter_nd_add")
      .NotInPlace()
      .Input("X")
      .Input("Index", kReadAnywhere)
      .Input("Updates")
      .Output("Out")
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(GradOpMaker({"Index", "Updates"}, {}, {"Out"}, {"X", "Updates"}))
      .OAR_FLOATS(ScatterNdAddKernel);
  r->Register("scatter_nd_add_grad")
      .Input("Index", kReadAnywhere)
      .Input("Updates", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Updates"), kDispensable)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS(ScatterNdAddGradKernel);
  r->Register("scatter")
      .NotInPlace()
      .Input("X")
      .Input("Ids", kReadAnywhere)
      .Input("Updates")
      .Output("Out")
      .Attr("overwrite", true)
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(GradOpMaker({"Ids", "Updates"}, {}, {"Out"}, {"X", "Updates"}))
      .OAR_FLOATS(ScatterKernel);
  r->Register("scatter_grad")
      .Input("Ids", kReadAnywhere)
      .Input("Updates", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Updates"), kDispensable)
      .Attr("overwrite", true)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS(ScatterGradKernel);
}

#undef OAR_FLOATS

}  // namespace oar
