#include "common/framework/selected_rows_util.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace oar {

namespace {
int64_t RowWidth(const SelectedRows& s) {
  return s.rows.empty() ? 0 : s.value.numel() / static_cast<int64_t>(s.rows.size());
}
}  // namespace

DDim EmptyRowShape(const SelectedRows& like) {
  DDim d = like.value.dims();
  if (d.size() == 0) d = DDim{0};
  d[0] = 0;
  return d;
}

template <typename T>
SelectedRows MergeRows(const SelectedRows& in) {
  const int64_t width = RowWidth(in);
  std::map<int64_t, std::vector<size_t>> where;
  for (size_t i = 0; i < in.rows.size(); ++i) where[in.rows[i]].push_back(i);
  SelectedRows out;
  out.height = in.height;
  DDim d = in.value.dims();
  if (d.size() == 0) d = DDim{0};
  d[0] = static_cast<int64_t>(where.size());
  T* o = out.value.mutable_data<T>(d);
  const T* v = in.value.data<T>();
  int64_t r = 0;
  for (const auto& [row, idx] : where) {
    out.rows.push_back(row);
    T* dst = o + r * width;
    std::fill(dst, dst + width, T(0));
    for (size_t i : idx) {
      for (int64_t k = 0; k < width; ++k) dst[k] += v[i * width + k];
    }
    ++r;
  }
  return out;
}

template <typename T>
Tensor Densify(const SelectedRows& in) {
  const int64_t width = RowWidth(in);
  DDim d = in.value.dims();
  if (d.size() == 0) d = DDim{0, 1};
  d[0] = in.height;
  Tensor out;
  T* o = out.mutable_data<T>(d);
  std::fill(o, o + out.numel(), T(0));
  const T* v = in.value.data<T>();
  for (size_t i = 0; i < in.rows.size(); ++i) {
    for (int64_t k = 0; k < width; ++k) o[in.rows[i] * width + k] += v[i * width + k];
  }
  return out;
}

absl::Status CheckSelectedRows(const SelectedRows& sr, const std::string& what) {
  if (!sr.value.initialized() && !sr.rows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": sparse rows have no values"));
  }
  if (!sr.rows.empty() && (sr.value.dims().size() < 1 || sr.value.dims()[0] != static_cast<int64_t>(sr.rows.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", sr.rows.size(), " rows but value has shape ", sr.value.dims().ToString()));
  }
  for (int64_t r : sr.rows) {
    if (r < 0 || r >= sr.height) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": row ", r, " is outside [0, ", sr.height, ")"));
    }
  }
  return absl::OkStatus();
}

template SelectedRows MergeRows<float>(const SelectedRows&);
template SelectedRows MergeRows<double>(const SelectedRows&);
template Tensor Densify<float>(const SelectedRows&);
template Tensor Densify<double>(const SelectedRows&);

absl::StatusOr<std::vector<SelectedRows>> SplitRowsBySections(const SelectedRows& in, absl::Span<const int64_t> heights,
                                                              const std::string& what) {
  OAR_RETURN_IF_ERROR(CheckSelectedRows(in, what));
  std::vector<int64_t> offsets = {0};
  for (int64_t h : heights) {
    if (h < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": a height section is negative (", h, ")"));
    offsets.push_back(offsets.back() + h);
  }
  std::vector<std::vector<size_t>> picked(heights.size());
  for (size_t k = 0; k < in.rows.size(); ++k) {
    const auto at = std::upper_bound(offsets.begin(), offsets.end(), in.rows[k]) - offsets.begin() - 1;
    if (in.rows[k] < 0 || at >= static_cast<long>(heights.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": row ", in.rows[k], " is outside the ", offsets.back(), " rows of its height sections"));
    }
    picked[static_cast<size_t>(at)].push_back(k);
  }
  const size_t row_bytes = static_cast<size_t>(RowWidth(in)) * SizeOf(in.value.dtype());
  std::vector<SelectedRows> out(heights.size());
  for (size_t s = 0; s < heights.size(); ++s) {
    SelectedRows& block = out[s];
    block.height = heights[s];
    DDim dims = EmptyRowShape(in);
    dims[0] = static_cast<int64_t>(picked[s].size());
    block.value.Resize(dims);
    char* dst = static_cast<char*>(block.value.mutable_data(in.value.dtype()));
    for (size_t k : picked[s]) {
      block.rows.push_back(in.rows[k] - offsets[s]);
      std::memcpy(dst, static_cast<const char*>(in.value.raw_data()) + k * row_bytes, row_bytes);
      dst += row_bytes;
    }
  }
  return out;
}

}  // namespace oar
