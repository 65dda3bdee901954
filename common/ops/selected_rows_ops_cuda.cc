// SelectedRows (sparse gradients) on the GPU: merging repeated rows
// (merge_selected_rows, and the merged gradient the rows-only updates
// read), sum with sparse inputs (sum's GPU kernel hands them here), and
// the dense view of a sparse gradient the other GPU optimizers read. Rows
// stay on the host, as SelectedRows keeps them; values live on the GPU.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/framework/selected_rows_util.h"
#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"

namespace oar {
namespace {

constexpr int64_t kNoPadding = -1;

// `rows` (host) as an int64 tensor on the kernel's GPU.
absl::StatusOr<Tensor> RowsOnGpu(const ExecutionContext& ctx, const std::vector<int64_t>& rows) {
  Tensor dev;
  OAR_RETURN_IF_ERROR(MakeTensor<int64_t>({static_cast<int64_t>(rows.size())}, rows).CopyTo(ctx.place(), &dev));
  return dev;
}

// A written sparse input's float values on the kernel's GPU, `width` per row.
absl::StatusOr<const float*> SparseValues(const ExecutionContext& ctx, const SelectedRows& s, const std::string& slot,
                                          size_t i, int64_t* width) {
  OAR_RETURN_IF_ERROR(CheckSelectedRows(s, absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), slot, i))));
  if (!(s.value.place() == ctx.place()) || s.value.dtype() != DataType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(
        ctx.op().type, ": input ", InputLabel(ctx.op(), slot, i), "'s values are ", DataTypeName(s.value.dtype()),
        " on ", s.value.place().ToString(), ", want float32 on ", ctx.place().ToString()));
  }
  *width = s.value.numel() / static_cast<int64_t>(s.rows.size());
  return s.value.data<float>();
}

// `s` (written, values on the GPU) with its rows sorted and unique and the
// values of repeated rows summed: the merged rows on the host, the merged
// values [unique, width] on the GPU.
absl::Status MergeOnGpu(const ExecutionContext& ctx, CudaContext* c, const SelectedRows& s, const float* v,
                        int64_t width, std::vector<int64_t>* rows, Tensor* values) {
  *rows = s.rows;
  std::sort(rows->begin(), rows->end());
  rows->erase(std::unique(rows->begin(), rows->end()), rows->end());
  std::vector<int64_t> slot;  // input row i goes to merged row slot[i]
  slot.reserve(s.rows.size());
  for (int64_t r : s.rows) slot.push_back(std::lower_bound(rows->begin(), rows->end(), r) - rows->begin());
  OAR_ASSIGN_OR_RETURN(Tensor slots, RowsOnGpu(ctx, slot));
  DDim d = s.value.dims();
  d[0] = static_cast<int64_t>(rows->size());
  values->Resize(d);
  float* out = values->mutable_data<float>(ctx.place());
  cuda::Fill<float>(out, values->numel(), 0.0f, c->stream);
  cuda::ScatterAddRows<float>(v, slots.data<int64_t>(), out, static_cast<int64_t>(s.rows.size()), width, kNoPadding,
                              c->stream);
  return LaunchStatus(ctx);
}

// merge_selected_rows, as MergeRows on the CPU.
absl::Status MergeKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  const Variable* in = ctx.InputVar("X");
  if (in == nullptr || !in->IsType<SelectedRows>()) {
    return absl::InvalidArgumentError("merge_selected_rows: input X is not a SelectedRows");
  }
  const SelectedRows& s = in->Get<SelectedRows>();
  SelectedRows merged;
  merged.height = s.height;
  if (!s.rows.empty()) {
    int64_t width = 0;
    OAR_ASSIGN_OR_RETURN(const float* v, SparseValues(ctx, s, "X", 0, &width));
    OAR_RETURN_IF_ERROR(MergeOnGpu(ctx, c, s, v, width, &merged.rows, &merged.value));
  } else {  // no rows: an empty value of the input's row shape, as MergeRows gives
    merged.value.Resize(EmptyRowShape(s));
    merged.value.mutable_data<float>(ctx.place());
  }
  *ctx.OutputVar("Out")->GetMutable<SelectedRows>() = std::move(merged);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<const float*> GpuOptimizerGrad(const ExecutionContext& ctx, const Tensor& param, Tensor* storage) {
  const Variable* v = ctx.InputVar("Grad");
  if (v == nullptr || !v->IsType<SelectedRows>()) {
    OAR_ASSIGN_OR_RETURN(const float* g, GpuIn<float>(ctx, "Grad"));
    if (ctx.Input("Grad")->numel() != param.numel()) {
      return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": Grad ('", ctx.op().Input("Grad")[0], "') has ",
                                                     ctx.Input("Grad")->numel(), " elements, Param ", param.numel()));
    }
    return g;
  }
  const SelectedRows& sr = v->Get<SelectedRows>();
  OAR_RETURN_IF_ERROR(CheckSelectedRows(sr, ctx.op().type + ": Grad"));
  if (param.dims().size() < 1 || sr.height != param.dims()[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": sparse Grad has height ", sr.height, ", Param is ", param.dims().ToString()));
  }
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  const int64_t width = sr.height > 0 ? param.numel() / sr.height : 0;
  storage->Resize(param.dims());
  float* dense = storage->mutable_data<float>(ctx.place());
  cuda::Fill<float>(dense, param.numel(), 0.0f, c->stream);
  const int64_t n = static_cast<int64_t>(sr.rows.size());
  if (n == 0) return dense;
  if (!(sr.value.place() == ctx.place()) || sr.value.dtype() != DataType::kFloat32 || sr.value.numel() != n * width) {
    return absl::InvalidArgumentError(absl::StrCat(
        ctx.op().type, ": sparse Grad's value is ", sr.value.dims().ToString(), " ", DataTypeName(sr.value.dtype()),
        " on ", sr.value.place().ToString(), "; want ", n, " rows of ", width, " float32 on ", ctx.place().ToString()));
  }
  Tensor rows;
  OAR_RETURN_IF_ERROR(MakeTensor<int64_t>({n}, sr.rows).CopyTo(ctx.place(), &rows));
  cuda::ScatterAddRows<float>(sr.value.data<float>(), rows.data<int64_t>(), dense, n, width, kNoPadding, c->stream);
  OAR_RETURN_IF_ERROR(LaunchStatus(ctx));
  return dense;
}

absl::StatusOr<GpuMergedGrad> GpuMergedSparseGrad(const ExecutionContext& ctx, const Tensor& param) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  const Variable* var = ctx.InputVar("Grad");
  if (var == nullptr || !var->IsType<SelectedRows>()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": Grad is not a SelectedRows"));
  }
  const SelectedRows& s = var->Get<SelectedRows>();
  OAR_RETURN_IF_ERROR(CheckSelectedRows(s, ctx.op().type + ": Grad"));
  if (param.dims().size() < 1 || s.height != param.dims()[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": sparse Grad has height ", s.height, ", Param is ", param.dims().ToString()));
  }
  GpuMergedGrad g;
  g.width = s.height > 0 ? param.numel() / s.height : 0;
  if (s.rows.empty()) return g;
  int64_t width = 0;
  OAR_ASSIGN_OR_RETURN(const float* v, SparseValues(ctx, s, "Grad", 0, &width));
  if (width != g.width) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": sparse Grad rows have ", width, " elements, Param rows ", g.width));
  }
  std::vector<int64_t> rows;
  OAR_RETURN_IF_ERROR(MergeOnGpu(ctx, c, s, v, width, &rows, &g.values));
  g.count = static_cast<int64_t>(rows.size());
  OAR_ASSIGN_OR_RETURN(g.rows, RowsOnGpu(ctx, rows));
  return g;
}

absl::Status GpuSumWithSparse(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  const size_t k = ctx.InputSize("X");
  std::vector<size_t> dense, sparse;
  for (size_t i = 0; i < k; ++i) {
    const Variable* v = ctx.InputVar("X", i);
    if (v != nullptr && v->IsType<SelectedRows>()) {
      sparse.push_back(i);
    } else {
      dense.push_back(i);
    }
  }
  Variable* out_var = ctx.OutputVar("Out");
  if (dense.empty()) {  // every input sparse: rows and values concatenated, as on the CPU
    SelectedRows merged;
    merged.height = ctx.InputVar("X", 0)->Get<SelectedRows>().height;
    int64_t total = 0, width = -1;
    std::vector<std::pair<const float*, int64_t>> parts;  // values, element count
    for (size_t i : sparse) {
      const SelectedRows& s = ctx.InputVar("X", i)->Get<SelectedRows>();
      if (s.rows.empty()) continue;
      int64_t w = 0;
      OAR_ASSIGN_OR_RETURN(const float* v, SparseValues(ctx, s, "X", i, &w));
      if (width < 0) {
        width = w;
        merged.height = s.height;
      } else if (w != width || s.height != merged.height) {
        return absl::InvalidArgumentError(absl::StrCat("sum: input ", InputLabel(ctx.op(), "X", i), " has ", s.height,
                                                       " rows of width ", w, ", expected ", merged.height, " of width ",
                                                       width));
      }
      merged.rows.insert(merged.rows.end(), s.rows.begin(), s.rows.end());
      total += static_cast<int64_t>(s.rows.size());
      parts.emplace_back(v, s.value.numel());
    }
    merged.value.Resize(width < 0 ? EmptyRowShape(ctx.InputVar("X", sparse[0])->Get<SelectedRows>())
                                  : DDim{total, width});
    float* dst = merged.value.mutable_data<float>(ctx.place());
    for (const auto& [v, n] : parts) {
      OAR_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(dst, v, sizeof(float) * static_cast<size_t>(n), cudaMemcpyDeviceToDevice, c->stream),
          "sum: joining sparse inputs"));
      dst += n;
    }
    *out_var->GetMutable<SelectedRows>() = std::move(merged);
    return LaunchStatus(ctx);
  }
  // Dense output: the dense inputs summed, then each sparse one's rows added
  // (Out becomes a dense tensor first, so it may not be a sparse input).
  for (size_t i : sparse) {
    if (ctx.InputVar("X", i) == out_var) {
      return absl::UnimplementedError("sum: Out may not alias a sparse input of a dense sum on the GPU");
    }
  }
  OAR_ASSIGN_OR_RETURN(const float* first, GpuIn<float>(ctx, "X", dense[0]));
  const Tensor* first_t = ctx.Input("X", dense[0]);
  const int64_t n = first_t->numel();
  std::vector<const float*> rest;
  for (size_t j = 1; j < dense.size(); ++j) {
    OAR_ASSIGN_OR_RETURN(const float* p, GpuIn<float>(ctx, "X", dense[j]));
    if (ctx.Input("X", dense[j])->numel() != n) {
      return absl::InvalidArgumentError(absl::StrCat("sum: input ", InputLabel(ctx.op(), "X", dense[j]), " has ",
                                                     ctx.Input("X", dense[j])->numel(), " elements, ",
                                                     InputLabel(ctx.op(), "X", dense[0]), " ", n));
    }
    rest.push_back(p);
  }
  Tensor* out = ctx.Output("Out");
  out->Resize(first_t->dims());
  float* o = out->mutable_data<float>(ctx.place());
  for (const float* p : rest) {
    if (p == o) return absl::UnimplementedError("sum: Out may alias the first dense input only, on the GPU");
  }
  if (o != first) {
    OAR_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(o, first, sizeof(float) * static_cast<size_t>(n), cudaMemcpyDeviceToDevice, c->stream),
        "sum: copy the first dense input"));
  }
  for (const float* p : rest) cuda::AddTo<float>(p, o, n, c->stream);
  for (size_t i : sparse) {
    const SelectedRows& s = ctx.InputVar("X", i)->Get<SelectedRows>();
    if (s.rows.empty()) continue;
    int64_t w = 0;
    OAR_ASSIGN_OR_RETURN(const float* v, SparseValues(ctx, s, "X", i, &w));
    if (s.height * w != n) {
      return absl::InvalidArgumentError(absl::StrCat("sum: input ", InputLabel(ctx.op(), "X", i), " has ", s.height,
                                                     " rows of width ", w, "; the dense inputs have ", n, " elements"));
    }
    OAR_ASSIGN_OR_RETURN(Tensor rows, RowsOnGpu(ctx, s.rows));
    cuda::ScatterAddRows<float>(v, rows.data<int64_t>(), o, static_cast<int64_t>(s.rows.size()), w, kNoPadding,
                                c->stream);
  }
  return LaunchStatus(ctx);
}

void RegisterCudaSelectedRowsKernels(OpRegistry* r) {
  r->Extend("merge_selected_rows").Kernel<float>(MergeKernel, Place::Kind::kCUDA);
}

}  // namespace oar
