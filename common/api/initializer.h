// Initializers, after fluid.initializer: each appends one op to the startup
// program's global block that fills a parameter (Constant → fill_constant,
// Uniform → uniform_random, Normal → gaussian_random, Xavier → either).
// A seed of 0 takes the startup program's random_seed().
//
// Thread-safety: immutable after construction.
#pragma once

#include <memory>

#include "common/api/program.h"

namespace oar {

class Initializer {
 public:
  virtual ~Initializer() = default;
  // Appends the filling op for `var` (already declared in `startup`'s global
  // block) to `startup`.
  virtual void Append(const VarDesc& var, Program* startup) const = 0;
};

using InitializerPtr = std::shared_ptr<const Initializer>;

namespace initializer {

InitializerPtr Constant(float value = 0.0f, bool force_cpu = false);
InitializerPtr Uniform(float low = -1.0f, float high = 1.0f, int32_t seed = 0);
InitializerPtr Normal(float loc = 0.0f, float scale = 1.0f, int32_t seed = 0);
// Glorot: uniform in ±sqrt(6/(fan_in+fan_out)), or normal with
// std sqrt(2/(fan_in+fan_out)). Fans of 0 are taken from the shape.
InitializerPtr Xavier(bool uniform = true, int64_t fan_in = 0, int64_t fan_out = 0, int32_t seed = 0);

}  // namespace initializer
}  // namespace oar
