#include "trainer/stack_rows.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/framework/selected_rows_util.h"

namespace oar {

absl::StatusOr<std::vector<Variable>> SplitByRows(const Variable& grad, const std::vector<int64_t>& sections,
                                                  const std::string& what) {
  int64_t total = 0;
  for (int64_t rows : sections) total += rows;
  const bool sparse = grad.IsType<SelectedRows>();
  if (!sparse && !grad.IsType<Tensor>()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is neither a tensor nor SelectedRows"));
  }
  const int64_t rows = sparse                                 ? grad.Get<SelectedRows>().height
                       : grad.Get<Tensor>().dims().size() > 0 ? grad.Get<Tensor>().dims()[0]
                                                              : 0;
  if (total != rows || std::any_of(sections.begin(), sections.end(), [](int64_t r) { return r < 0; })) {
    return absl::InvalidArgumentError(absl::StrCat("sections [", absl::StrJoin(sections, ", "), "] do not cut the ",
                                                   rows, " rows of ", what, " (negative, or not adding up to them)"));
  }
  std::vector<Variable> parts(sections.size());
  if (sparse) {
    OAR_ASSIGN_OR_RETURN(std::vector<SelectedRows> blocks,
                         SplitRowsBySections(grad.Get<SelectedRows>(), sections, what));
    for (size_t i = 0; i < blocks.size(); ++i) *parts[i].GetMutable<SelectedRows>() = std::move(blocks[i]);
    return parts;
  }
  const Tensor& t = grad.Get<Tensor>();
  int64_t begin = 0;
  for (size_t i = 0; i < sections.size(); ++i) {
    *parts[i].GetMutable<Tensor>() = t.Slice(begin, begin + sections[i]);  // a view: no copy
    begin += sections[i];
  }
  return parts;
}

absl::Status StackRows(const std::vector<Variable>& blocks, const std::vector<std::string>& names,
                       const std::vector<std::string>& endpoints, Tensor* out) {
  if (blocks.empty()) return absl::InvalidArgumentError("stacking blocks: none given");
  const Tensor* first = blocks[0].IsType<Tensor>() ? &blocks[0].Get<Tensor>() : nullptr;
  DDim dims = first != nullptr ? first->dims() : DDim{};
  int64_t rows = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Tensor* t = blocks[i].IsType<Tensor>() ? &blocks[i].Get<Tensor>() : nullptr;
    bool same = t != nullptr && first != nullptr && t->dims().size() == dims.size() && dims.size() > 0 &&
                t->dtype() == first->dtype();
    for (int d = 1; same && d < dims.size(); ++d) same = t->dims()[d] == dims[d];
    if (!same) {
      return absl::InvalidArgumentError(
          absl::StrCat("recv: block '", names[i], "' from ", endpoints[i], " (",
                       t != nullptr ? DataTypeName(t->dtype()) + t->dims().ToString() : "not a dense tensor",
                       ") does not stack with '", names[0], "' (",
                       first != nullptr ? DataTypeName(first->dtype()) + dims.ToString() : "?", ")"));
    }
    rows += t->dims()[0];
  }
  dims[0] = rows;
  out->Resize(dims);
  char* dst = static_cast<char*>(out->mutable_data(first->dtype()));
  for (const auto& b : blocks) {
    const Tensor& t = b.Get<Tensor>();
    std::memcpy(dst, t.raw_data(), t.nbytes());
    dst += t.nbytes();
  }
  return absl::OkStatus();
}

}  // namespace oar
