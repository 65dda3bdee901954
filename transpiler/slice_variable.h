// Fluid's slice_variable rule: how a parameter (and its gradient) is cut
// into blocks across pservers. A variable of N elements is cut into at most
// `slice_count` blocks of whole rows (block size rounded up to a multiple of
// the row width, the product of dims[1:]), and never into blocks smaller
// than `min_block_size` elements (fewer blocks instead). The last block
// holds the remainder.
//
//   SliceVariable({"fc_w", {1000, 100}}, 3, 8192)
//     → fc_w:0:33400, fc_w:1:33400, fc_w:2:33200
//
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace oar {

struct VarBlock {
  std::string varname;
  int64_t block_id = 0;  // the block's index within its variable
  int64_t size = 0;      // elements in this block
  // Fluid's "name:block_id:size" form.
  std::string ToString() const;
  bool operator==(const VarBlock& o) const { return varname == o.varname && block_id == o.block_id && size == o.size; }
};

struct VarShape {
  std::string name;
  std::vector<int64_t> shape;
};

// Blocks of every variable, in order. Shapes must be fully known (no -1).
std::vector<VarBlock> SliceVariable(const std::vector<VarShape>& vars, int64_t slice_count, int64_t min_block_size);

// Fluid's names for block `i` of `var`: "fc_w.block0"; and the per-trainer
// gradient name: "fc_w@GRAD.block1.trainer_0" (or "fc_b@GRAD.trainer_1").
std::string BlockName(const std::string& var, int64_t block_id);
std::string TrainerVarName(const std::string& var, int trainer_id);

}  // namespace oar
