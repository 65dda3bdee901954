// The ParallelExecutor's communication among its own places (parallel_
// executor.h): the all-reduce, reduce and broadcast handles of the SSA graph.
// On CPU places they run the in-process kernels on the places' buffers
// (collective/inprocess_collective.h), one slice per handle; on GPU places
// each dense one is a single NCCL group call over every GPU
// (collective/nccl_places.h), queued on the GPUs' streams, and the handles
// of the other slices have nothing to do. Sparse gradients (SelectedRows)
// are joined row-wise wherever they live, never densified. Also the copies
// of place 0's persistables to the others (at Create, and SpreadFromPlace0).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/device/device_memory.h"
#include "trainer/collective/inprocess_collective.h"
#include "trainer/collective/nccl_places.h"
#include "trainer/parallel_executor.h"

namespace oar {

absl::Status ParallelExecutor::MoveToItsPlace(Tensor* t, size_t p, const std::string& name) const {
  if (t->place() == places_[p]) return absl::OkStatus();
  Tensor moved;
  OAR_RETURN_IF_ERROR(Annotate(t->CopyTo(places_[p], &moved), absl::StrCat("'", name, "' to place ", p)));
  *t = std::move(moved);
  return absl::OkStatus();
}

absl::Status ParallelExecutor::AllReduceSparse(const std::vector<Variable*>& vars, int to) {
  // The merged rows are every place's rows (their sum), joined on the
  // destination place (place 0 for all of them) and copied to the others.
  const size_t home = to >= 0 ? static_cast<size_t>(to) : 0;
  SelectedRows merged;
  merged.height = vars[0]->Get<SelectedRows>().height;
  std::vector<const Tensor*> values;
  for (Variable* v : vars) {
    const SelectedRows& s = v->Get<SelectedRows>();
    merged.rows.insert(merged.rows.end(), s.rows.begin(), s.rows.end());
    if (!s.rows.empty()) values.push_back(&s.value);
  }
  if (!values.empty()) {
    DDim d = values[0]->dims();
    d[0] = static_cast<int64_t>(merged.rows.size());
    merged.value.Resize(d);
    const Place at = places_[home].is_gpu() ? places_[home] : CPUPlace();
    char* dst = static_cast<char*>(merged.value.mutable_data(values[0]->dtype(), at));
    for (const Tensor* t : values) {
      OAR_RETURN_IF_ERROR(CopyBytes(at, dst, t->place(), t->raw_data(), t->nbytes()));
      dst += t->nbytes();
    }
    // The copies into the merged value have read every place's value
    // before any of those is replaced below (and its memory reused).
    OAR_RETURN_IF_ERROR(SyncPlace(at));
  }
  for (size_t p = 0; p < vars.size(); ++p) {
    if (to >= 0 && static_cast<int>(p) != to) continue;
    SelectedRows* d = vars[p]->GetMutable<SelectedRows>();
    if (!places_[p].is_gpu() || p == home || !merged.value.initialized()) {
      *d = merged;  // host places share the merged buffer, as before
      continue;
    }
    d->rows = merged.rows;
    d->height = merged.height;
    OAR_RETURN_IF_ERROR(merged.value.CopyTo(places_[p], &d->value));
  }
  return absl::OkStatus();
}

absl::Status ParallelExecutor::AllReduce(const std::string& grad, int to, size_t chunk, size_t chunks) {
  std::vector<Variable*> vars;
  for (size_t p = 0; p < places_.size(); ++p) {
    Variable* v = local_scopes_[p]->FindVar(grad);
    if (v == nullptr || !v->IsInitialized()) {
      return absl::FailedPreconditionError(absl::StrCat("all_reduce: gradient '", grad, "' missing on place ", p));
    }
    vars.push_back(v);
  }
  // Chunk 0 merges the whole of a sparse gradient, and on GPUs the whole
  // of a dense one (one NCCL call).
  if (vars[0]->IsType<SelectedRows>()) return chunk == 0 ? AllReduceSparse(vars, to) : absl::OkStatus();
  if (nccl_ != nullptr && chunk != 0) return absl::OkStatus();
  const Tensor& first = vars[0]->Get<Tensor>();
  const int64_t numel = first.numel();
  std::vector<Tensor*> bufs;
  for (size_t p = 0; p < vars.size(); ++p) {
    const Tensor* t = vars[p]->IsType<Tensor>() ? &vars[p]->Get<Tensor>() : nullptr;
    if (t == nullptr || t->numel() != numel || t->dtype() != first.dtype()) {
      return absl::InternalError(absl::StrCat("all_reduce: gradient '", grad, "' differs in shape on place ", p));
    }
    bufs.push_back(vars[p]->GetMutable<Tensor>());
  }
  if (nccl_ != nullptr) {
    // A gradient a host-side op wrote goes to its GPU first.
    for (size_t p = 0; p < bufs.size(); ++p) OAR_RETURN_IF_ERROR(MoveToItsPlace(bufs[p], p, grad));
    return to >= 0 ? nccl_->Reduce(bufs, static_cast<size_t>(to), grad) : nccl_->AllReduce(bufs, grad);
  }
  // Slice [lo, hi) of the gradient: summed in place into the home place's
  // buffer, then copied to the others for all-reduce (no scratch buffer).
  // The chunk handles of one gradient touch disjoint slices and run
  // concurrently.
  const int64_t lo = numel * static_cast<int64_t>(chunk) / static_cast<int64_t>(chunks);
  const int64_t hi = numel * static_cast<int64_t>(chunk + 1) / static_cast<int64_t>(chunks);
  const size_t home = to >= 0 ? static_cast<size_t>(to) : chunk % vars.size();
  OAR_RETURN_IF_ERROR(Annotate(ReduceSlice(bufs, home, lo, hi), absl::StrCat("all_reduce of '", grad, "'")));
  if (to < 0) CopySlice(bufs, home, lo, hi);
  return absl::OkStatus();
}

absl::Status ParallelExecutor::Broadcast(const std::string& param, size_t from) {
  Variable* src = local_scopes_[from]->FindVar(param);
  const bool sparse = src != nullptr && src->IsType<SelectedRows>();
  if (src == nullptr || (!sparse && (!src->IsType<Tensor>() || !src->Get<Tensor>().initialized()))) {
    return absl::FailedPreconditionError(absl::StrCat("broadcast: '", param, "' has no value on place ", from));
  }
  std::vector<Variable*> dsts(places_.size(), nullptr);
  for (size_t p = 0; p < places_.size(); ++p) {
    if (p == from) continue;
    dsts[p] = local_scopes_[p]->FindVar(param);
    if (dsts[p] == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("broadcast: '", param, "' missing on place ", p));
    }
  }
  if (sparse) {
    const SelectedRows& s = src->Get<SelectedRows>();
    for (size_t p = 0; p < places_.size(); ++p) {
      if (p == from) continue;
      SelectedRows* d = dsts[p]->GetMutable<SelectedRows>();
      d->rows = s.rows;
      d->height = s.height;
      if (places_[p].is_gpu()) {
        OAR_RETURN_IF_ERROR(s.value.CopyTo(places_[p], &d->value));
      } else {
        d->value.CopyFrom(s.value);
      }
    }
    return absl::OkStatus();
  }
  if (nccl_ == nullptr) {
    for (Variable* d : dsts) {
      if (d != nullptr) d->GetMutable<Tensor>()->CopyFrom(src->Get<Tensor>());
    }
    return absl::OkStatus();
  }
  // GPUs: every place's buffer sized as the source's, then one NCCL
  // broadcast (a value a host-side op wrote, such as a parameter pulled
  // back from the pservers, goes to its GPU first).
  Tensor* from_t = src->GetMutable<Tensor>();
  OAR_RETURN_IF_ERROR(MoveToItsPlace(from_t, from, param));
  std::vector<Tensor*> bufs(places_.size(), nullptr);
  for (size_t p = 0; p < places_.size(); ++p) {
    if (p == from) {
      bufs[p] = from_t;
      continue;
    }
    Tensor* d = dsts[p]->GetMutable<Tensor>();
    d->Resize(from_t->dims());
    d->set_lod(from_t->lod());
    d->mutable_data(from_t->dtype(), places_[p]);
    bufs[p] = d;
  }
  return nccl_->Broadcast(bufs, from, param);
}

absl::Status ParallelExecutor::CopyPersistablesFromPlace0() {
  for (size_t p = 1; p < place_scopes_.size() && owns_place_scopes_; ++p) {
    for (const auto& [name, v] : program_->Block(0).vars()) {
      if (!v.persistable) continue;
      const Variable* src = scope_->FindVar(name);
      if (src == nullptr || !src->IsType<Tensor>() || !src->Get<Tensor>().initialized()) continue;
      Tensor* dst = place_scopes_[p]->Var(name)->GetMutable<Tensor>();
      if (places_[p].is_gpu()) {
        OAR_RETURN_IF_ERROR(
            Annotate(src->Get<Tensor>().CopyTo(places_[p], dst), absl::StrCat("copying '", name, "' to place ", p)));
      } else {
        dst->CopyFrom(src->Get<Tensor>());
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ParallelExecutor::SpreadFromPlace0() {
  if (!owns_place_scopes_) {
    return absl::FailedPreconditionError(
        "this executor's places use another executor's persistables (share_vars_from): spread them there");
  }
  OAR_RETURN_IF_ERROR(CopyPersistablesFromPlace0());
  for (const Place& p : places_) OAR_RETURN_IF_ERROR(Annotate(SyncPlace(p), p.ToString()));
  return absl::OkStatus();
}

}  // namespace oar
