#include "common/framework/ddim.h"

#include "absl/strings/str_join.h"

namespace oar {

int64_t DDim::numel() const { return Product(0, size()); }

int64_t DDim::Product(int begin, int end) const {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) {
    if (d_[i] < 0) return -1;
    p *= d_[i];
  }
  return p;
}

DDim DDim::FlattenTo2D(int num_col_dims) const { return DDim{Product(0, num_col_dims), Product(num_col_dims, size())}; }

bool DDim::HasUnknown() const {
  for (int64_t v : d_)
    if (v < 0) return true;
  return false;
}

std::string DDim::ToString() const { return absl::StrCat("[", absl::StrJoin(d_, ", "), "]"); }

}  // namespace oar
