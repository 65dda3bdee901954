// The pooling of sequence_pool (its `pooltype` attribute), shared by the
// CPU kernel (sequence_ops.cc) and the device code (cuda_launch.h), which
// sees nothing else of the framework.
//
// Thread-safety: a type.
#pragma once

namespace oar {

// SUM, AVERAGE, SQRT (sum / √len), MAX, FIRST, LAST.
enum class SequencePool { kSum, kAverage, kSqrt, kMax, kFirst, kLast };

}  // namespace oar
