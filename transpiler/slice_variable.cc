#include "transpiler/slice_variable.h"

#include "absl/strings/str_cat.h"

namespace oar {

std::string VarBlock::ToString() const { return absl::StrCat(varname, ":", block_id, ":", size); }

std::vector<VarBlock> SliceVariable(const std::vector<VarShape>& vars, int64_t slice_count, int64_t min_block_size) {
  std::vector<VarBlock> blocks;
  for (const VarShape& v : vars) {
    int64_t numel = 1;
    for (int64_t d : v.shape) numel *= d;
    // At most one block per min_block_size elements, at least one block.
    int64_t split = slice_count;
    const int64_t max_blocks = std::max<int64_t>(1, numel / min_block_size);
    if (max_blocks < split) split = max_blocks;
    int64_t block_size = (numel + split - 1) / split;
    if (v.shape.size() >= 2) {  // whole rows
      int64_t width = 1;
      for (size_t i = 1; i < v.shape.size(); ++i) width *= v.shape[i];
      if (width > 0 && block_size % width != 0) block_size += width - block_size % width;
    }
    if (block_size <= 0) block_size = 1;
    const int64_t count = (numel + block_size - 1) / block_size;
    for (int64_t b = 0; b < std::max<int64_t>(count, 1); ++b) {
      blocks.push_back({v.name, b, std::min(block_size, numel - b * block_size)});
    }
  }
  return blocks;
}

std::string BlockName(const std::string& var, int64_t block_id) { return absl::StrCat(var, ".block", block_id); }

std::string TrainerVarName(const std::string& var, int trainer_id) {
  return absl::StrCat(var, ".trainer_", trainer_id);
}

}  // namespace oar
