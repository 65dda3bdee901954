// Example models, built with the C++ layers API and looked up by name by the
// `oar` commands (train, export). A model builds its forward pass into the
// current programs and names its feeds and outputs; the caller adds the
// optimizer.
//
//   const ModelSpec* m = FindModel("fashion_mlp");
//   ProgramGuard g(&main, &startup);
//   BuiltModel b = m->build();
//
// Thread-safety: the registry is immutable after first use.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/api/program.h"

namespace oar {

struct BuiltModel {
  std::vector<Var> feeds;  // in feeding order: inputs, then the label
  Var prediction;
  Var loss;      // mean loss over the batch
  Var accuracy;  // top-1 accuracy over the batch
  Var auc;       // models with an auc layer: the global AUC so far
};

struct ModelSpec {
  std::string name;
  std::string description;
  std::string dataset;  // what feeds it: "fashion-mnist" (oar train/launch/run), "multislot" (oar async-train)
  std::function<BuiltModel()> build;
  // Optional learning-rate schedule from the base rate and the steps in an
  // epoch (built inside the model's programs); constant when unset.
  std::function<Var(float base_lr, int64_t steps_per_epoch)> learning_rate;
  int64_t train_examples = 60000;  // examples per epoch, for the schedule
};

// All registered models, by name.
const std::vector<ModelSpec>& AllModels();
// nullptr when no model has that name.
const ModelSpec* FindModel(const std::string& name);
// "fashion_mlp, ..." for error messages and --help.
std::string ModelNames();

// Individual models (examples/<name>.cc).
ModelSpec FashionMlpSpec();
ModelSpec FashionCnnSpec();
ModelSpec CtrDnnSpec(bool distributed);

// ctr_dnn's inputs, as `oar gen-ctr-data` writes them: a dense slot of 13
// floats, then sparse id slots C1..C26 hashed into the embedding table's
// rows, then the label.
inline constexpr char kCtrDenseSlot[] = "dense_input";
inline constexpr int kCtrDenseFeatures = 13;
inline constexpr int kCtrSparseSlots = 26;
inline constexpr int64_t kCtrSparseFeatureDim = 1000001;  // Fluid's example table height
inline constexpr int64_t kCtrEmbeddingSize = 10;

}  // namespace oar
