// pool2d's geometry from its attributes and X's shape, shared by the CPU
// kernels (pool_ops.cc) and the GPU kernels (pool_ops_cuda.cc): window,
// strides and paddings (global_pooling: the whole image, no padding;
// adaptive: ksize is the output size), and the output size, floor or
// ceil_mode.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/framework/ddim.h"
#include "common/framework/program_desc.h"

namespace oar {

struct PoolGeom {
  int64_t n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw;
  bool is_max, exclusive, ceil_mode;
  // Adaptive pooling whose windows differ in size: output cell i covers
  // [floor(i*H/oh), ceil((i+1)*H/oh)), and averages over that window.
  // (Where oh divides H, and ow W, the windows are a regular kh = H/oh
  // stride-kh pooling, and the geometry says so instead.)
  bool adaptive = false;
};

// InvalidArgument naming the bad attribute. oh/ow are -1 where X's size is
// not known yet. Adaptive pooling (ksize is the output size) comes back as
// the regular pooling it equals where it is one.
absl::StatusOr<PoolGeom> PoolGeometry(const OpDesc& op, const DDim& x);

}  // namespace oar
