// What fused_elemwise_activation's CPU kernel (fused_ops.cc) and GPU kernel
// (fused_ops_cuda.cc) share: the activation its functor_list names.
//
// Thread-safety: stateless.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/framework/program_desc.h"

namespace oar {

enum class FusedAct { kRelu, kSigmoid, kTanh };

// functor_list must be [relu|sigmoid|tanh + suffix, "elementwise_add" +
// suffix] (suffix "" for the forward op, "_grad" for its gradient);
// Unimplemented naming the list otherwise.
absl::StatusOr<FusedAct> ParseFusedFunctors(const OpDesc& op, const std::string& suffix);

}  // namespace oar
