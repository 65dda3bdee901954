// Builds a registered example model into main/startup programs with the
// chosen optimizer, as `oar train` and `oar export` both need.
//
// Thread-safety: uses the calling thread's program guard; externally
// synchronized.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/api/program.h"
#include "common/data/fashion_mnist.h"
#include "common/framework/executor.h"
#include "examples/model_zoo.h"

namespace oar::cli {

struct BuildOptions {
  std::string model = "fashion_mlp";
  std::string optimizer = "adam";  // sgd | momentum | adam | lazy_adam | adagrad
  float learning_rate = 0.001f;
  int32_t seed = 1;          // startup program's random_seed
  int64_t batch_size = 128;  // sets the steps per epoch of a model's schedule
  // When set, every random initializer in the startup program becomes a
  // fill_constant of this value (runs that must start equal, e.g. a
  // distributed run against a single process).
  std::optional<float> constant_init;
};

struct ModelPrograms {
  Program main;     // forward + backward + optimize
  Program startup;  // initializers
  Program test;     // forward only (main cloned for test before minimize)
  BuiltModel vars;  // handles into `main`
};

// InvalidArgument for an unknown model or optimizer, or a model whose
// programs fail to build (the program's recorded error).
absl::StatusOr<std::unique_ptr<ModelPrograms>> BuildModel(const BuildOptions& options);

// Gives a [batch, 784] image tensor the shape the model's feed declares
// (e.g. [batch, 1, 28, 28]) without copying.
void ShapeLikeFeed(const Var& feed, Tensor* t);

struct EvalResult {
  double loss = 0, accuracy = 0;
};
// The test program's mean loss and accuracy over `test`, on the parameters
// in `scope`.
absl::StatusOr<EvalResult> Evaluate(Executor& exe, const ModelPrograms& p, Scope* scope, const Dataset& test,
                                    int64_t batch_size);

// OK unless `model` is an example that trains from MultiSlot files
// (ctr_dnn), which the Fashion-MNIST commands cannot feed: InvalidArgument
// pointing to `oar async-train`.
absl::Status RequireFashionMnistModel(const std::string& model);

// BuildModel with the options from the --model, --optimizer, --lr, --seed
// and --batch_size flags (defined in train_cmd.cc, shared by the commands
// that build a model).
absl::StatusOr<std::unique_ptr<ModelPrograms>> BuildModelFromFlags();

// Where a trainer runs, from --device (cpu or gpu) and --selected_gpus:
// CPUPlace, or CUDAPlace of the first selected GPU. A one-line
// FailedPrecondition when --device gpu finds no GPU.
absl::StatusOr<Place> TrainPlaceFromFlags();
// The places `oar train` trains on, adding --places: that many CPU places
// (0: CPU_NUM), or the first --places selected GPUs (0: all of them);
// InvalidArgument when more GPUs are asked for than are selected.
absl::StatusOr<std::vector<Place>> TrainPlacesFromFlags();

}  // namespace oar::cli
