#include "common/framework/nan_inf_check.h"

#include <atomic>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/framework/selected_rows.h"
#include "common/framework/tensor.h"

namespace oar {
namespace {

std::atomic<bool> check_nan_inf{false};

struct Count {
  int64_t nan = 0, inf = 0, first = -1;
};

template <typename T>
Count CountNonFinite(const T* p, int64_t n) {
  Count c;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(p[i])) continue;
    if (std::isnan(p[i]))
      ++c.nan;
    else
      ++c.inf;
    if (c.first < 0) c.first = i;
  }
  return c;
}

// "[2, 5]": the multi-index of flat index `i` in `dims`.
std::string IndexIn(int64_t i, const DDim& dims) {
  std::vector<int64_t> at(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    const int64_t extent = std::max<int64_t>(dims[d], 1);
    at[d] = i % extent;
    i /= extent;
  }
  return absl::StrCat("[", absl::StrJoin(at, ", "), "]");
}

absl::Status CheckTensor(const OpDesc& op, const std::string& slot, const std::string& name, const Tensor& t,
                         const char* what) {
  if (!t.initialized() || t.numel() == 0) return absl::OkStatus();
  if (t.dtype() != DataType::kFloat32 && t.dtype() != DataType::kFloat64) return absl::OkStatus();
  const Tensor* host = &t;
  Tensor copy;
  if (!t.place().is_cpu()) {
    if (absl::Status s = t.CopyTo(Place{}, &copy); !s.ok()) return s;
    host = &copy;
  }
  const Count c = host->dtype() == DataType::kFloat32 ? CountNonFinite(host->data<float>(), host->numel())
                                                      : CountNonFinite(host->data<double>(), host->numel());
  if (c.first < 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("FLAGS_check_nan_inf: op '", op.type, "' wrote ",
                                                 c.nan > 0 ? "NaN" : "Inf", " to '", name, "' (", slot, what,
                                                 "): ", c.nan, " NaN and ", c.inf, " Inf of its ", host->numel(),
                                                 " values, the first at ", IndexIn(c.first, host->dims())));
}

}  // namespace

void SetCheckNanInf(bool on) { check_nan_inf.store(on, std::memory_order_relaxed); }
bool CheckNanInf() { return check_nan_inf.load(std::memory_order_relaxed); }

absl::Status CheckOutputsFinite(const OpDesc& op, const OpBinding& binding) {
  for (const BoundSlot& slot : binding.outputs) {
    const std::vector<std::string>& names = op.Output(*slot.name);
    for (size_t i = 0; i < slot.vars.size(); ++i) {
      const Variable* v = slot.vars[i];
      if (v == nullptr) continue;
      const std::string& name = i < names.size() ? names[i] : *slot.name;
      absl::Status s;
      if (v->IsType<Tensor>()) {
        s = CheckTensor(op, *slot.name, name, v->Get<Tensor>(), "");
      } else if (v->IsType<SelectedRows>()) {
        s = CheckTensor(op, *slot.name, name, v->Get<SelectedRows>().value, ", its rows' values");
      }
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace oar
