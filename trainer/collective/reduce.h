// The arithmetic every all-reduce in Oar does: element-wise sums of raw
// buffers of one dtype, written so the compiler vectorizes them. The
// ParallelExecutor's cross-place reductions and the collective backends all
// call these (one implementation, not one per backend).
//
// Thread-safety: stateless functions.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "common/framework/data_type.h"

namespace oar {

// True for the dtypes SumInto adds: fp32, fp64, fp16, int32, int64.
bool Summable(DataType t);

// dst[i] += src[i] for i < n (elements of `t`). InvalidArgument for a
// dtype that does not add.
absl::Status SumInto(DataType t, void* dst, const void* src, size_t n);

// dst[i] = a[i] + b[i].
absl::Status SumOf(DataType t, void* dst, const void* a, const void* b, size_t n);

}  // namespace oar
