// The ops of Fluid's distributed lookup table that are not RPC:
//  - split_ids (trainer): the ids of every Ids input, unique and sorted, cut
//    into Out[k] = the ids with id % N == k (N = number of Out); or one
//    SelectedRows (the table's gradient) cut by row id the same way, each
//    part keeping its global row ids and its own values.
//  - merge_ids (trainer): puts the rows prefetched per pserver (Rows[k]:
//    ids, X[k]: their values) back in the order of each Ids[j] into Out[j]
//    ([n_j, width], Ids[j]'s LoD).
//  - lookup_sparse_table (pserver): Out = the rows of Ids in the SparseTable
//    W, rows created with the table's initializer when absent (with
//    auto_grown_table; otherwise absent rows read as zeros).
// And the update kernels that sgd, adagrad and adam run when their Param is
// a SparseTable (sparse_table_update.h).
#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "common/framework/op_registry.h"
#include "common/framework/selected_rows_util.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"
#include "common/ops/sparse_table_update.h"

namespace oar {
namespace {

absl::Status NegativeId(const ExecutionContext& ctx, int64_t id) {
  return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": id ", id, " is negative"));
}

absl::Status SplitIdsKernel(const ExecutionContext& ctx) {
  const size_t shards = ctx.op().Output("Out").size();
  if (shards == 0) return absl::InvalidArgumentError("split_ids: no Out");
  const Variable* first = ctx.InputVar("Ids", 0);
  if (first != nullptr && first->IsType<SelectedRows>()) {  // the table's gradient, cut by row
    if (ctx.InputSize("Ids") != 1) return absl::InvalidArgumentError("split_ids: one SelectedRows Ids at a time");
    const SelectedRows& in = first->Get<SelectedRows>();
    OAR_RETURN_IF_ERROR(CheckSelectedRows(in, "split_ids: Ids"));
    const int64_t width = in.rows.empty() ? (in.value.dims().size() > 1 ? in.value.dims()[1] : 0)
                                          : in.value.numel() / static_cast<int64_t>(in.rows.size());
    std::vector<std::vector<size_t>> picks(shards);
    for (size_t i = 0; i < in.rows.size(); ++i) picks[static_cast<size_t>(in.rows[i]) % shards].push_back(i);
    const float* src = in.rows.empty() ? nullptr : in.value.data<float>();
    for (size_t k = 0; k < shards; ++k) {
      SelectedRows* out = ctx.OutputVar("Out", k)->GetMutable<SelectedRows>();
      out->height = in.height;
      out->rows.clear();
      float* dst = out->value.mutable_data<float>(DDim{static_cast<int64_t>(picks[k].size()), width});
      for (size_t j = 0; j < picks[k].size(); ++j) {
        out->rows.push_back(in.rows[picks[k][j]]);
        std::memcpy(dst + j * width, src + picks[k][j] * width, sizeof(float) * static_cast<size_t>(width));
      }
    }
    return absl::OkStatus();
  }
  std::vector<int64_t> ids;  // unique and sorted, as Fluid's (a sort, not a tree: no allocation per id)
  for (size_t i = 0; i < ctx.InputSize("Ids"); ++i) {
    OAR_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, "Ids", i));
    OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Ids", *t));
    const int64_t* p = t->data<int64_t>();
    for (int64_t j = 0; j < t->numel(); ++j) {
      if (p[j] < 0) return NegativeId(ctx, p[j]);
    }
    ids.insert(ids.end(), p, p + t->numel());
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<std::vector<int64_t>> parts(shards);
  for (int64_t id : ids) parts[static_cast<size_t>(id) % shards].push_back(id);
  for (size_t k = 0; k < shards; ++k) {
    Tensor* out = ctx.Output("Out", k);
    int64_t* dst = out->mutable_data<int64_t>(DDim{static_cast<int64_t>(parts[k].size()), 1});
    std::copy(parts[k].begin(), parts[k].end(), dst);
    out->set_lod({});
  }
  return absl::OkStatus();
}

absl::Status MergeIdsKernel(const ExecutionContext& ctx) {
  const size_t shards = ctx.InputSize("Rows");
  if (shards != ctx.InputSize("X")) {
    return absl::InvalidArgumentError(absl::StrCat("merge_ids: ", shards, " Rows but ", ctx.InputSize("X"), " X"));
  }
  absl::flat_hash_map<int64_t, const float*> where;
  int64_t width = -1;
  for (size_t k = 0; k < shards; ++k) {
    const Tensor* rows = ctx.Input("Rows", k);
    const Tensor* x = ctx.Input("X", k);
    if (rows == nullptr || !rows->initialized() || rows->numel() == 0) continue;  // nothing was fetched there
    if (x == nullptr || !x->initialized() || x->dims().size() != 2 || x->dims()[0] != rows->numel()) {
      return absl::InvalidArgumentError(absl::StrCat("merge_ids: X '", ctx.op().Input("X")[k], "' does not hold ",
                                                     rows->numel(), " rows for Rows '", ctx.op().Input("Rows")[k],
                                                     "'"));
    }
    OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Rows", *rows));
    OAR_RETURN_IF_ERROR(RequireDtype<float>(ctx, "X", *x));
    if (width >= 0 && x->dims()[1] != width) return absl::InvalidArgumentError("merge_ids: X widths differ");
    width = x->dims()[1];
    const int64_t* ids = rows->data<int64_t>();
    for (int64_t i = 0; i < rows->numel(); ++i) where[ids[i]] = x->data<float>() + i * width;
  }
  for (size_t j = 0; j < ctx.InputSize("Ids"); ++j) {
    OAR_ASSIGN_OR_RETURN(const Tensor* ids, RequireInput(ctx, "Ids", j));
    OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Ids", *ids));
    if (ids->numel() > 0 && width < 0) return absl::InvalidArgumentError("merge_ids: no rows were fetched");
    Tensor* out = ctx.Output("Out", j);
    float* dst = out->mutable_data<float>(DDim{ids->numel(), std::max<int64_t>(width, 0)});
    const int64_t* p = ids->data<int64_t>();
    for (int64_t i = 0; i < ids->numel(); ++i) {
      auto it = where.find(p[i]);
      if (it == where.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("merge_ids: id ", p[i], " of '", ctx.op().Input("Ids")[j], "' was not fetched"));
      }
      std::memcpy(dst + i * width, it->second, sizeof(float) * static_cast<size_t>(width));
    }
    out->set_lod(ids->lod());
  }
  return absl::OkStatus();
}

absl::StatusOr<SparseTable*> TableInput(const ExecutionContext& ctx, const std::string& slot) {
  Variable* v = ctx.InputVar(slot);
  if (v == nullptr || !v->IsType<SparseTable>()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", slot, " ('", ctx.op().Input(slot)[0],
                                                   "') is not a sparse table (a pserver's distributed table shard)"));
  }
  return v->GetMutable<SparseTable>();
}

absl::Status LookupSparseTableKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(SparseTable * w, TableInput(ctx, "W"));
  OAR_ASSIGN_OR_RETURN(const Tensor* ids, RequireInput(ctx, "Ids"));
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Ids", *ids));
  const int64_t width = w->width(), n = ids->numel(), pad = ctx.Attr<int64_t>("padding_idx");
  const bool grow = ctx.Attr<bool>("auto_grown_table");
  float* out = ctx.Output("Out")->mutable_data<float>(DDim{n, width});
  const int64_t* p = ids->data<int64_t>();
  std::vector<int64_t> want, at;  // the ids to look up (padding rows stay zero), and where they go
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] < 0) return NegativeId(ctx, p[i]);
    if (pad >= 0 && p[i] == pad) continue;
    want.push_back(p[i]);
    at.push_back(i);
  }
  std::vector<float*> rows(want.size(), nullptr);
  if (grow) {
    w->FindOrCreateRows(want.data(), static_cast<int64_t>(want.size()), rows.data());
  } else {
    for (size_t k = 0; k < want.size(); ++k) rows[k] = const_cast<float*>(w->Find(want[k]));
  }
  std::fill(out, out + n * width, 0.0f);
  for (size_t k = 0; k < want.size(); ++k) {
    if (rows[k] != nullptr) std::memcpy(out + at[k] * width, rows[k], sizeof(float) * static_cast<size_t>(width));
  }
  ctx.Output("Out")->set_lod(ids->lod());
  return absl::OkStatus();
}

// The table's gradient, rows merged (sums of duplicates), width checked.
absl::StatusOr<SelectedRows> TableGrad(const ExecutionContext& ctx, const SparseTable& table) {
  const Variable* v = ctx.InputVar("Grad");
  if (v == nullptr || !v->IsType<SelectedRows>()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": the sparse table '", ctx.op().Input("Param")[0],
                                                   "' takes a SelectedRows gradient"));
  }
  const SelectedRows& g = v->Get<SelectedRows>();
  OAR_RETURN_IF_ERROR(CheckSelectedRows(g, ctx.op().type + ": Grad"));
  if (g.rows.empty()) return g;
  OAR_RETURN_IF_ERROR(RequireDtype<float>(ctx, "Grad", g.value));
  if (g.value.numel() != static_cast<int64_t>(g.rows.size()) * table.width()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": Grad rows are ", g.value.dims().ToString(),
                                                   ", the table is ", table.width(), " wide"));
  }
  return MergeRows<float>(g);
}

absl::Status CheckInPlace(const ExecutionContext& ctx, const std::string& in, const std::string& out) {
  if (ctx.InputVar(in) != ctx.OutputVar(out)) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": a sparse table is updated in place: ", out,
                                                   " must be ", in, " ('", ctx.op().Input(in)[0], "')"));
  }
  return absl::OkStatus();
}

absl::StatusOr<float> Rate(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* lr, RequireInput(ctx, "LearningRate"));
  OAR_RETURN_IF_ERROR(RequireDtype<float>(ctx, "LearningRate", *lr));
  return lr->data<float>()[0];
}

// An accumulator (`slot`) of the table: follows the table's rows.
absl::StatusOr<SparseTable*> Accumulator(const ExecutionContext& ctx, SparseTable* param, const std::string& slot,
                                         const std::string& out) {
  OAR_ASSIGN_OR_RETURN(SparseTable * acc, TableInput(ctx, slot));
  OAR_RETURN_IF_ERROR(CheckInPlace(ctx, slot, out));
  OAR_RETURN_IF_ERROR(Annotate(acc->Follow(*param), ctx.op().Input(slot)[0]));
  return acc;
}

}  // namespace

bool ParamIsTable(const ExecutionContext& ctx) {
  const Variable* v = ctx.InputVar("Param");
  return v != nullptr && v->IsType<SparseTable>();
}

absl::Status TableSgd(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(SparseTable * p, TableInput(ctx, "Param"));
  OAR_RETURN_IF_ERROR(CheckInPlace(ctx, "Param", "ParamOut"));
  OAR_ASSIGN_OR_RETURN(const float rate, Rate(ctx));
  OAR_ASSIGN_OR_RETURN(SelectedRows g, TableGrad(ctx, *p));
  const int64_t w = p->width(), n = static_cast<int64_t>(g.rows.size());
  std::vector<float*> rows(g.rows.size());
  p->FindOrCreateRows(g.rows.data(), n, rows.data());
  for (size_t r = 0; r < g.rows.size(); ++r) {
    float* row = rows[r];
    const float* v = g.value.data<float>() + r * w;
    for (int64_t k = 0; k < w; ++k) row[k] -= rate * v[k];
  }
  return absl::OkStatus();
}

absl::Status TableAdagrad(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(SparseTable * p, TableInput(ctx, "Param"));
  OAR_RETURN_IF_ERROR(CheckInPlace(ctx, "Param", "ParamOut"));
  OAR_ASSIGN_OR_RETURN(SparseTable * m, Accumulator(ctx, p, "Moment", "MomentOut"));
  OAR_ASSIGN_OR_RETURN(const float rate, Rate(ctx));
  OAR_ASSIGN_OR_RETURN(SelectedRows g, TableGrad(ctx, *p));
  const float eps = ctx.Attr<float>("epsilon");
  const int64_t w = p->width(), n = static_cast<int64_t>(g.rows.size());
  std::vector<float*> prows(g.rows.size()), mrows(g.rows.size());
  std::vector<int64_t> index(g.rows.size());
  p->FindOrCreateRows(g.rows.data(), n, prows.data(), index.data());
  m->FollowerRows(index.data(), g.rows.data(), n, mrows.data());
  for (size_t r = 0; r < g.rows.size(); ++r) {
    float* prow = prows[r];
    float* mrow = mrows[r];
    const float* v = g.value.data<float>() + r * w;
    for (int64_t k = 0; k < w; ++k) {
      mrow[k] += v[k] * v[k];
      prow[k] -= rate * v[k] / (std::sqrt(mrow[k]) + eps);
    }
  }
  return absl::OkStatus();
}

absl::Status TableAdam(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(SparseTable * p, TableInput(ctx, "Param"));
  OAR_RETURN_IF_ERROR(CheckInPlace(ctx, "Param", "ParamOut"));
  OAR_ASSIGN_OR_RETURN(SparseTable * m1, Accumulator(ctx, p, "Moment1", "Moment1Out"));
  OAR_ASSIGN_OR_RETURN(SparseTable * m2, Accumulator(ctx, p, "Moment2", "Moment2Out"));
  OAR_ASSIGN_OR_RETURN(const float rate, Rate(ctx));
  OAR_ASSIGN_OR_RETURN(const Tensor* b1p, RequireInput(ctx, "Beta1Pow"));
  OAR_ASSIGN_OR_RETURN(const Tensor* b2p, RequireInput(ctx, "Beta2Pow"));
  OAR_ASSIGN_OR_RETURN(SelectedRows g, TableGrad(ctx, *p));
  const float b1 = ctx.Attr<float>("beta1"), b2 = ctx.Attr<float>("beta2"), eps = ctx.Attr<float>("epsilon");
  const float corr2 = std::sqrt(1.0f - b2p->data<float>()[0]);
  const float lr_t = rate * corr2 / (1.0f - b1p->data<float>()[0]), eps_t = eps * corr2;
  const int64_t w = p->width(), n = static_cast<int64_t>(g.rows.size());
  std::vector<float*> prows(g.rows.size()), arows(g.rows.size()), brows(g.rows.size());
  std::vector<int64_t> index(g.rows.size());
  p->FindOrCreateRows(g.rows.data(), n, prows.data(), index.data());
  m1->FollowerRows(index.data(), g.rows.data(), n, arows.data());
  m2->FollowerRows(index.data(), g.rows.data(), n, brows.data());
  for (size_t r = 0; r < g.rows.size(); ++r) {  // lazy: only the received rows move
    float* prow = prows[r];
    float* a = arows[r];
    float* b = brows[r];
    const float* v = g.value.data<float>() + r * w;
    for (int64_t k = 0; k < w; ++k) {
      a[k] = b1 * a[k] + (1 - b1) * v[k];
      b[k] = b2 * b[k] + (1 - b2) * v[k] * v[k];
      prow[k] -= lr_t * (a[k] / (std::sqrt(b[k]) + eps_t));
    }
  }
  return absl::OkStatus();
}

namespace {

// fake_init: a distributed table's stand-in in a trainer's startup program
// (Fluid 1.6's transpiler writes it): the table lives on the pservers and
// the trainer prefetches its rows, so nothing is allocated; the variable
// only records the table's shape.
absl::Status FakeInitKernel(const ExecutionContext& ctx) {
  if (Tensor* out = ctx.Output("Out")) out->Resize(DDim(ctx.Attr<std::vector<int64_t>>("shape")));
  return absl::OkStatus();
}

}  // namespace

// split_ids and merge_ids are host-side: on a GPU trainer they run on the
// host beside the prefetch and send they feed (ids and rows for RPC), their
// inputs copied there.
void RegisterDistributedTableOps(OpRegistry* r) {
  r->Register("fake_init")
      .HostSide()
      .Output("Out")
      .Attr("shape", std::vector<int64_t>{})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype([](const ExecutionContext&) { return DataType::kFloat32; })
      .Kernel<float>(FakeInitKernel);
  r->Register("split_ids")
      .NotInPlace()
      .HostSide()
      .Input("Ids", kDuplicable)
      .Output("Out", kDuplicable)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype([](const ExecutionContext&) { return DataType::kFloat32; })
      .Kernel<float>(SplitIdsKernel);
  r->Register("merge_ids")
      .NotInPlace()
      .HostSide()
      .Input("Ids", kDuplicable)
      .Input("Rows", kDuplicable)
      .Input("X", kDuplicable)
      .Output("Out", kDuplicable)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype([](const ExecutionContext&) { return DataType::kFloat32; })
      .Kernel<float>(MergeIdsKernel);
  r->Register("lookup_sparse_table")
      .NotInPlace()
      .Input("W")
      .Input("Ids")
      .Output("Out")
      .Attr("padding_idx", int64_t{-1})
      .Attr("is_sparse", false)
      .Attr("is_distributed", false)
      .Attr("auto_grown_table", true)
      .Attr("is_test", false)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype([](const ExecutionContext&) { return DataType::kFloat32; })
      .Kernel<float>(LookupSparseTableKernel);
}

}  // namespace oar
