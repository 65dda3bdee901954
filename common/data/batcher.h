// Batcher: walks a dataset in (optionally shuffled) mini-batches, copying
// each batch's rows into contiguous tensors.
//
//   Batcher b(ds, 128, /*shuffle=*/true, /*seed=*/1);
//   for (b.Reset(); b.Next(&x, &y);) ...
//
// Thread-safety: externally synchronized.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "common/data/fashion_mnist.h"

namespace oar {

class Batcher {
 public:
  Batcher(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed = 0);
  // Starts a new epoch (reshuffling when enabled).
  void Reset();
  // Fills the next batch (the last may be smaller); false at the epoch's end.
  bool Next(Tensor* images, Tensor* labels);
  int64_t num_batches() const { return (data_.size() + batch_size_ - 1) / batch_size_; }

 private:
  const Dataset& data_;
  int64_t batch_size_;
  bool shuffle_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;
  int64_t pos_ = 0;
};

}  // namespace oar
