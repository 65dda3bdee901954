// pool2d's geometry from its attributes and X's shape, shared by the CPU
// kernels (pool_ops.cc) and the GPU kernels (pool_ops_cuda.cc): window,
// strides and paddings (global_pooling: the whole image, no padding), and
// the output size, floor or ceil_mode.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/ddim.h"
#include "common/program_desc.h"

namespace oar {

struct PoolGeom {
  int64_t n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw;
  bool is_max, exclusive, ceil_mode;
};

// InvalidArgument naming the bad attribute; Unimplemented for adaptive
// pooling. oh/ow are -1 where X's size is not known yet.
absl::StatusOr<PoolGeom> PoolGeometry(const OpDesc& op, const DDim& x);

}  // namespace oar
