#include "trainer/stack_rows.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace oar {

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
