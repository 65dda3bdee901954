// VarStore in an elastic job's sync step: the step's gradient is the mean
// over the trainers that contributed to it (var_store.h, FinalizeAmong),
// made from every trainer's kept copy (ReceiveCopy, SumAhead).
// Also ZeroVariable, which both of the store's files use.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/base/tiled_sum.h"
#include "pserver/var_store.h"
#include "pserver/var_store_receivable.h"

namespace oar {

void ZeroVariable(Variable* v) {
  if (v->IsType<SelectedRows>()) {
    SelectedRows* sr = v->GetMutable<SelectedRows>();
    sr->rows.clear();
    DDim d = sr->value.dims();
    if (d.size() > 0) {
      d[0] = 0;
      sr->value.Resize(d);
      sr->value.mutable_data(sr->value.dtype());
    }
  } else if (v->IsType<Tensor>() && v->Get<Tensor>().initialized()) {
    Tensor* t = v->GetMutable<Tensor>();
    std::memset(t->mutable_data(t->dtype()), 0, t->nbytes());
  }
}

namespace {

template <typename T>
void ScaleInto(const Tensor& from, Tensor* to, double k) {
  const T* src = from.data<T>();
  T* dst = to->mutable_data<T>(from.dims());
  for (int64_t i = 0; i < from.numel(); ++i) dst[i] = static_cast<T>(src[i] * k);
}

// `t` times k, in a buffer of its own (the received one may be a view).
absl::Status Scale(Tensor* t, double k, const std::string& name) {
  Tensor out;
  switch (t->dtype()) {
    case DataType::kFloat32:
      ScaleInto<float>(*t, &out, k);
      break;
    case DataType::kFloat64:
      ScaleInto<double>(*t, &out, k);
      break;
    default:
      return absl::UnimplementedError(absl::StrCat("'", name, "' is ", DataTypeName(t->dtype()),
                                                   "; an elastic job averages float32 and float64 gradients"));
  }
  *t = std::move(out);
  return absl::OkStatus();
}

// keep_copies: `r.name` = the sum over `among`'s copies in trainer order,
// each times fanin/|among| (var_store_elastic.cc, below).
absl::Status SumCopiesLocked(Scope* scope, int fanin, const VarStore::Receivable& r, const std::set<int>& among)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(r.mu);

}  // namespace

absl::Status VarStore::FinalizeAmong(const Receivable& r, const std::set<int>& contributors) {
  absl::MutexLock l(&r.mu);
  for (int t : contributors) {
    if (r.arrived.count(t) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("trainer ", t, " contributed to the step without sending '", r.name, "'"));
    }
  }
  if (r.mode == Receivable::Mode::kDirect) return absl::OkStatus();  // one slot: its contributor's
  if (r.keep_copies)
    return r.summed == contributors ? absl::OkStatus() : SumCopiesLocked(scope_, fanin_, r, contributors);
  const double k = static_cast<double>(fanin_) / static_cast<double>(contributors.size());
  const Tensor* like = nullptr;  // a contributor's dense copy: the shape of an empty slot
  for (int t : contributors) {
    Variable* v = scope_->Var(r.copies[static_cast<size_t>(t)]);
    if (v->IsType<SelectedRows>()) {
      if (k != 1) OAR_RETURN_IF_ERROR(Scale(&v->GetMutable<SelectedRows>()->value, k, r.name));
    } else {
      if (k != 1) OAR_RETURN_IF_ERROR(Scale(v->GetMutable<Tensor>(), k, r.name));
      like = &v->Get<Tensor>();
    }
  }
  for (int t = 0; t < fanin_; ++t) {
    if (contributors.count(t)) continue;
    Variable* v = scope_->Var(r.copies[static_cast<size_t>(t)]);
    if (r.sparse) v->GetMutable<SelectedRows>();  // a slot never sent: no rows
    if (!r.sparse && like != nullptr &&
        (!v->IsType<Tensor>() || !v->Get<Tensor>().initialized() || v->Get<Tensor>().dims() != like->dims())) {
      Tensor* empty = v->GetMutable<Tensor>();  // a slot never sent: zeros of the contributors' shape
      empty->Resize(like->dims());
      empty->mutable_data(like->dtype());
    }
    ZeroVariable(v);
  }
  return absl::OkStatus();
}

absl::Status VarStore::ReceiveCopy(const Receivable& r, int trainer, const rpc::IncomingMessage& msg) {
  absl::MutexLock l(&r.mu);
  msg.DecodeInto(scope_->Var(r.copies[static_cast<size_t>(trainer)]));
  r.arrived.insert(trainer);
  if (r.summed.count(trainer)) r.summed.clear();  // sent again: the sum no longer holds
  return absl::OkStatus();
}

namespace {

// out = 0 + each copy, in the copies' (trainer) order, each times k unless
// k is 1: the rounding of scaling each slot (ScaleInto) and running `sum`
// over the slots, with each copy read once.
template <typename T>
void SumCopies(const std::vector<const Tensor*>& copies, double k, Tensor* out) {
  std::vector<const T*> data;
  for (const Tensor* c : copies) data.push_back(c->data<T>());
  T* dst = out->mutable_data<T>(copies[0]->dims());
  SumTiled<T>(data, 0, copies[0]->numel(), dst, k);
}

absl::Status SumCopiesLocked(Scope* scope, int fanin, const VarStore::Receivable& r, const std::set<int>& among)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(r.mu) {
  r.summed.clear();
  std::vector<const Tensor*> copies;
  for (int t : among) {
    const Variable* v = scope->FindVar(r.copies[static_cast<size_t>(t)]);
    if (v == nullptr || !v->IsType<Tensor>() || !v->Get<Tensor>().initialized()) {
      return absl::FailedPreconditionError(absl::StrCat("trainer ", t, "'s '", r.name, "' holds no tensor"));
    }
    const Tensor& c = v->Get<Tensor>();
    if (!copies.empty() && (c.dims() != copies[0]->dims() || c.dtype() != copies[0]->dtype())) {
      return absl::InvalidArgumentError(absl::StrCat("trainer ", t, " sent '", r.name, "' as ", DataTypeName(c.dtype()),
                                                     c.dims().ToString(), ", another contributor as ",
                                                     DataTypeName(copies[0]->dtype()), copies[0]->dims().ToString()));
    }
    copies.push_back(&c);
  }
  if (copies.empty()) return absl::InvalidArgumentError(absl::StrCat("no contributor to '", r.name, "'"));
  const double k = static_cast<double>(fanin) / static_cast<double>(among.size());
  Tensor* out = scope->Var(r.name)->GetMutable<Tensor>();
  switch (copies[0]->dtype()) {
    case DataType::kFloat32:
      SumCopies<float>(copies, k, out);
      break;
    case DataType::kFloat64:
      SumCopies<double>(copies, k, out);
      break;
    default:
      return absl::UnimplementedError(absl::StrCat("'", r.name, "' is ", DataTypeName(copies[0]->dtype()),
                                                   "; an elastic job averages float32 and float64 gradients"));
  }
  r.summed = among;
  return absl::OkStatus();
}

}  // namespace

void VarStore::SumAhead(const Receivable& r, const std::set<int>& likely) {
  if (!r.keep_copies || likely.empty()) return;
  absl::MutexLock l(&r.mu);
  if (r.summed == likely) return;
  for (int t : likely) {
    if (!r.arrived.count(t)) return;
  }
  // An error here is FinalizeAmong's to report (it sums again).
  (void)SumCopiesLocked(scope_, fanin_, r, likely);
}

}  // namespace oar
