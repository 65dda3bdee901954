// A small MLP for the trainer tests: deterministic initial values (fixed
// seeds), Momentum, optional sparse embedding; and its fixed batches.
//
// Thread-safety: test-only.
#pragma once

#include <cmath>
#include <string>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/framework/executor.h"

namespace oar {

// An MLP with deterministic initial values, trained on a fixed batch.
struct Mlp {
  UniqueNameGuard names;
  Program main, startup;
  Var loss;
  explicit Mlp(bool sparse_embedding = false, const std::string& hidden_act = "relu") {
    main.set_random_seed(5);
    startup.set_random_seed(5);
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {6});
    Var label = layers::data("label", {1}, DataType::kInt64);
    Var h = layers::fc(x, 16, hidden_act);
    if (sparse_embedding) {
      Var e = layers::embedding(label, {4, 16}, /*is_sparse=*/true);
      h = layers::elementwise_add(h, layers::reshape(e, {-1, 16}));
    }
    loss = layers::mean(layers::cross_entropy(layers::fc(h, 4, "softmax"), label));
    optimizer::Momentum(0.1f, 0.9f).minimize(loss);
  }
  static FeedMap Batch(int step) {
    std::vector<float> xs(8 * 6);
    std::vector<int64_t> ys(8);
    for (int i = 0; i < 8; ++i) {
      for (int k = 0; k < 6; ++k) xs[i * 6 + k] = std::sin(0.3f * (i + 1) * (k + 1)) + 0.01f * step;
      ys[i] = i % 4;
    }
    return {{"x", MakeTensor<float>({8, 6}, xs)}, {"label", MakeTensor<int64_t>({8, 1}, ys)}};
  }
};

}  // namespace oar
