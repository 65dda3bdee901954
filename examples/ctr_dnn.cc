// ctr_dnn: Fluid's CTR example network — 26 sparse slots C1..C26, each an
// embedding (one shared table, SparseFeatFactors, 10 wide, sparse
// gradients) summed over the slot's ids; 13 dense features; fc layers
// 400-400-400 (relu, Normal(0, 1/sqrt(fan_in)) weights); a 2-way softmax;
// cross-entropy; accuracy; and Fluid's auc (4096 thresholds, a 20-batch
// window). Trains from MultiSlot files (`oar async-train --model ctr_dnn`,
// data from `oar gen-ctr-data`). ctr_dnn_dist: the same with the table
// distributed over a pserver job's pservers (is_distributed).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/api/initializer.h"
#include "common/api/layers.h"
#include "examples/model_zoo.h"

namespace oar {

ModelSpec CtrDnnSpec(bool distributed) {
  ModelSpec spec;
  spec.name = distributed ? "ctr_dnn_dist" : "ctr_dnn";
  spec.description = distributed ? "ctr_dnn with its table distributed over the pservers (is_distributed: prefetched "
                                   "rows, sharded updates); for pserver jobs"
                                 : "Fluid's CTR DNN: 26 summed sparse embeddings + 13 dense -> fc 400x3 -> softmax 2, "
                                   "with auc";
  spec.dataset = "multislot";
  spec.build = [distributed] {
    BuiltModel m;
    Var dense = layers::data(kCtrDenseSlot, {kCtrDenseFeatures});
    std::vector<Var> sparse;
    for (int i = 1; i <= kCtrSparseSlots; ++i) {
      sparse.push_back(layers::data(absl::StrCat("C", i), {1}, DataType::kInt64, /*lod_level=*/1));
    }
    Var label = layers::data("label", {1}, DataType::kInt64);
    std::vector<Var> parts;
    ParamAttr table{.name = "SparseFeatFactors", .initializer = initializer::Uniform()};
    for (const Var& ids : sparse) {
      Var emb =
          layers::embedding(ids, {kCtrSparseFeatureDim, kCtrEmbeddingSize}, /*is_sparse=*/true, distributed, -1, table);
      parts.push_back(layers::sequence_pool(emb, "sum"));
    }
    parts.push_back(dense);
    Var h = layers::concat(parts, 1);
    int64_t width = kCtrSparseSlots * kCtrEmbeddingSize + kCtrDenseFeatures;
    for (int layer = 0; layer < 3; ++layer) {
      h = layers::fc(h, 400, "relu", ParamAttr{.initializer = initializer::Normal(0.0f, 1.0f / std::sqrt(width))});
      width = 400;
    }
    m.prediction =
        layers::fc(h, 2, "softmax", ParamAttr{.initializer = initializer::Normal(0.0f, 1.0f / std::sqrt(width))});
    m.loss = layers::mean(layers::cross_entropy(m.prediction, label));
    m.accuracy = layers::accuracy(m.prediction, label);
    m.auc = layers::auc(m.prediction, label, "ROC", 4096, 20).auc;
    m.feeds = {dense};
    m.feeds.insert(m.feeds.end(), sparse.begin(), sparse.end());
    m.feeds.push_back(label);
    return m;
  };
  spec.train_examples = 0;  // from files: not known in advance
  return spec;
}

}  // namespace oar
