// Feed checking; see feed_check.h.
//
// Thread-safety: stateless functions.
#include "common/data/feed_check.h"

#include "absl/strings/str_cat.h"

namespace oar {

absl::Status FitFeedToVar(const VarDesc& var, const std::string& where, Tensor* t) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(where, " for variable '", var.name, "': ", why));
  };
  if (t->dtype() != var.dtype) {
    return bad(absl::StrCat("the data is ", DataTypeName(t->dtype()), ", the variable ", DataTypeName(var.dtype),
                            " (convert the data, e.g. arr.astype('", DataTypeName(var.dtype), "'))"));
  }
  bool has_lod = !t->lod().empty();
  if (var.lod_level > 0 && !has_lod) {
    return bad(absl::StrCat("the variable has lod_level ", var.lod_level,
                            " (sequences of different lengths); this source gives no LoD: use MultiSlot files "
                            "(--data_feed), whose sparse slots carry it"));
  }
  if (var.lod_level == 0 && has_lod) {
    // One value per example (a label in a sparse slot, as Fluid's CTR
    // descs write it): the LoD says nothing, and Fluid feeds it so.
    const std::vector<size_t>& offsets = t->lod()[0];
    bool one_each = t->lod().size() == 1;
    for (size_t i = 0; one_each && i < offsets.size(); ++i) one_each = offsets[i] == i;
    if (!one_each) {
      return bad(
          "the data has sequences of several values (LoD) but the variable has lod_level 0: declare it with "
          "lod_level=1, or make the slot dense");
    }
    t->set_lod({});
    has_lod = false;
  }
  const DDim got = t->dims();
  if (got.size() == 0) return bad("a scalar, not a batch (its first axis must be examples)");
  if (has_lod) {  // LoD rows are ids or values, not examples: only the rank is Paddle's to check
    return absl::OkStatus();
  }
  const int64_t n = got[0];
  if (var.shape.empty()) return absl::OkStatus();
  if (var.shape[0] >= 0 && var.shape[0] != n) {
    return bad(absl::StrCat("the variable's shape ", DDim(var.shape).ToString(), " fixes the batch at ", var.shape[0],
                            "; this batch has ", n, " examples"));
  }
  int64_t per_example = 1, unknown = 0;
  for (size_t i = 1; i < var.shape.size(); ++i) {
    if (var.shape[i] < 0)
      ++unknown;
    else
      per_example *= var.shape[i];
  }
  const int64_t data_per_example = n > 0 ? got.numel() / n : 0;
  if (unknown == 0) {
    if (n > 0 && per_example != data_per_example) {
      return bad(absl::StrCat("the data is ", got.ToString(), " (", data_per_example,
                              " values per example); the variable is ", DDim(var.shape).ToString(), " (", per_example,
                              " per example)"));
    }
    DDim want;
    want.push_back(n);
    for (size_t i = 1; i < var.shape.size(); ++i) want.push_back(var.shape[i]);
    t->Resize(want);
    return absl::OkStatus();
  }
  // Unknown dimensions past the batch: the data's own, where the ranks agree
  // and the known ones match.
  bool fits = got.size() == static_cast<int>(var.shape.size());
  for (size_t i = 1; fits && i < var.shape.size(); ++i)
    fits = var.shape[i] < 0 || var.shape[i] == got[static_cast<int>(i)];
  if (!fits) {
    return bad(absl::StrCat("the data is ", got.ToString(), "; the variable is ", DDim(var.shape).ToString()));
  }
  return absl::OkStatus();
}

absl::StatusOr<const VarDesc*> FeedVar(const ProgramDesc& program, const std::string& program_name,
                                       const std::string& name) {
  const VarDesc* var = program.Block(0).FindVar(name);
  if (var == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(program_name, " has no variable '", name, "' to feed"));
  }
  return var;
}

}  // namespace oar
