// SelectedRows: a sparse slice of a [height, width...] tensor: `value` holds
// one row per entry of `rows` (row indices into the full tensor, possibly
// repeated). Sparse gradients of embeddings travel in this form.
//
// Thread-safety: a value type; externally synchronized.
#pragma once

#include <cstdint>
#include <vector>

#include "common/framework/tensor.h"

namespace oar {

struct SelectedRows {
  std::vector<int64_t> rows;
  int64_t height = 0;
  Tensor value;
};

}  // namespace oar
