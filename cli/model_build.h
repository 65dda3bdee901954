// Builds a registered example model into main/startup programs with the
// chosen optimizer, as `oar train` and `oar export` both need.
//
// Thread-safety: uses the calling thread's program guard; externally
// synchronized.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/api/program.h"
#include "examples/model_zoo.h"

namespace oar::cli {

struct BuildOptions {
  std::string model = "fashion_mlp";
  std::string optimizer = "adam";  // sgd | momentum | adam
  float learning_rate = 0.001f;
  int32_t seed = 1;                 // startup program's random_seed
  int64_t batch_size = 128;         // sets the steps per epoch of a model's schedule
};

struct ModelPrograms {
  Program main;      // forward + backward + optimize
  Program startup;   // initializers
  Program test;      // forward only (main cloned for test before minimize)
  BuiltModel vars;   // handles into `main`
};

// InvalidArgument for an unknown model or optimizer, or a model whose
// programs fail to build (the program's recorded error).
absl::StatusOr<std::unique_ptr<ModelPrograms>> BuildModel(const BuildOptions& options);

// BuildModel with the options from the --model, --optimizer, --lr, --seed
// and --batch_size flags (defined in train_cmd.cc, shared by the commands
// that build a model).
absl::StatusOr<std::unique_ptr<ModelPrograms>> BuildModelFromFlags();

}  // namespace oar::cli
