// VarStore in an elastic job's sync step: the step's gradient is the mean
// over the trainers that contributed to it (var_store.h, FinalizeAmong).
// Also ZeroVariable, which both of the store's files use.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
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

}  // namespace oar
