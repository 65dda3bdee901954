#include "trainer/grad_merge.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/framework/selected_rows_util.h"

namespace oar {
namespace {

absl::Status Mismatch(const std::string& name, size_t i, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("merging the queued gradients of '", name, "': value ", i, " ", what, " value 0's"));
}

template <typename T>
void Scale(Tensor* t, double by) {
  T* p = t->data<T>();
  for (int64_t i = 0; i < t->numel(); ++i) p[i] = static_cast<T>(p[i] * by);
}

void ScaleAny(Tensor* t, double by) {
  if (t->dtype() == DataType::kFloat64) {
    Scale<double>(t, by);
  } else {
    Scale<float>(t, by);
  }
}

template <typename T>
void AddInto(T* dst, const T* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

absl::StatusOr<Variable> MergeDense(const std::string& name, const std::vector<const Variable*>& values) {
  const Tensor& first = values[0]->Get<Tensor>();
  Variable out;
  Tensor* sum = out.GetMutable<Tensor>();
  sum->Resize(first.dims());
  std::memcpy(sum->mutable_data(first.dtype()), first.raw_data(), first.nbytes());
  for (size_t i = 1; i < values.size(); ++i) {
    if (!values[i]->IsType<Tensor>()) return Mismatch(name, i, "is sparse, unlike");
    const Tensor& t = values[i]->Get<Tensor>();
    if (t.dtype() != first.dtype() || !(t.dims() == first.dims())) {
      return Mismatch(name, i, absl::StrCat("(", DataTypeName(t.dtype()), t.dims().ToString(), ") differs from"));
    }
    if (first.dtype() == DataType::kFloat64) {
      AddInto(sum->data<double>(), t.data<double>(), t.numel());
    } else {
      AddInto(sum->data<float>(), t.data<float>(), t.numel());
    }
  }
  return out;
}

absl::StatusOr<Variable> MergeSparse(const std::string& name, const std::vector<const Variable*>& values,
                                     bool merge_rows) {
  const SelectedRows& first = values[0]->Get<SelectedRows>();
  // The first value with rows sets the row shape and dtype.
  const SelectedRows* shape = nullptr;
  int64_t total = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i]->IsType<SelectedRows>()) return Mismatch(name, i, "is dense, unlike");
    const SelectedRows& s = values[i]->Get<SelectedRows>();
    OAR_RETURN_IF_ERROR(CheckSelectedRows(s, absl::StrCat("gradient '", name, "' (queued value ", i, ")")));
    if (s.height != first.height) return Mismatch(name, i, absl::StrCat("has height ", s.height, ", not"));
    if (s.rows.empty()) continue;
    if (shape == nullptr) shape = &s;
    const int64_t w = s.value.numel() / static_cast<int64_t>(s.rows.size());
    const int64_t w0 = shape->value.numel() / static_cast<int64_t>(shape->rows.size());
    if (w != w0 || s.value.dtype() != shape->value.dtype()) {
      return Mismatch(name, i, absl::StrCat("(rows of ", w, " ", DataTypeName(s.value.dtype()), ") differs from"));
    }
    total += static_cast<int64_t>(s.rows.size());
  }
  Variable out;
  SelectedRows* all = out.GetMutable<SelectedRows>();
  if (shape == nullptr) {  // no rows at all
    *all = first;
    return out;
  }
  all->height = first.height;
  DDim dims = shape->value.dims();
  dims[0] = total;
  all->value.Resize(dims);
  char* dst = static_cast<char*>(all->value.mutable_data(shape->value.dtype()));
  all->rows.reserve(static_cast<size_t>(total));
  for (const Variable* v : values) {
    const SelectedRows& s = v->Get<SelectedRows>();
    if (s.rows.empty()) continue;
    all->rows.insert(all->rows.end(), s.rows.begin(), s.rows.end());
    std::memcpy(dst, s.value.raw_data(), s.value.nbytes());
    dst += s.value.nbytes();
  }
  if (merge_rows) *all = all->value.dtype() == DataType::kFloat64 ? MergeRows<double>(*all) : MergeRows<float>(*all);
  return out;
}

}  // namespace

absl::StatusOr<Variable> MergeGrads(const std::string& name, const std::vector<const Variable*>& values,
                                    MergeOptions options) {
  if (values.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("merging the queued gradients of '", name, "': none queued"));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const Variable* v = values[i];
    const Tensor* t = v == nullptr                ? nullptr
                      : v->IsType<Tensor>()       ? &v->Get<Tensor>()
                      : v->IsType<SelectedRows>() ? &v->Get<SelectedRows>().value
                                                  : nullptr;
    const bool empty_sparse = t != nullptr && v->IsType<SelectedRows>() && v->Get<SelectedRows>().rows.empty();
    if (t == nullptr || (!empty_sparse && (!t->initialized() ||
                                           (t->dtype() != DataType::kFloat32 && t->dtype() != DataType::kFloat64)))) {
      return Mismatch(name, i, "is not an fp32 or fp64 tensor or SelectedRows, as is not");
    }
  }
  absl::StatusOr<Variable> merged =
      values[0]->IsType<Tensor>() ? MergeDense(name, values) : MergeSparse(name, values, options.merge_rows);
  if (!merged.ok() || !options.average || values.size() == 1) return merged;
  Tensor* t = merged->IsType<Tensor>() ? merged->GetMutable<Tensor>() : &merged->GetMutable<SelectedRows>()->value;
  if (t->initialized() && t->numel() > 0) ScaleAny(t, 1.0 / static_cast<double>(values.size()));
  return merged;
}

}  // namespace oar
