// Batcher: walks a dataset in (optionally shuffled) mini-batches, copying
// each batch's rows into contiguous tensors. With shards > 1 it walks one
// shard: the examples at positions p % shards == shard of the epoch's order
// (the same shuffle, by seed, in every trainer), so trainer t's k-th batch
// of B holds its part of the single process's k-th batch of B * shards.
//
// A last batch smaller than min_batch (the places it will be split across)
// is left out of every epoch, as a reader with drop_last would leave it.
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
  Batcher(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed = 0, int64_t shard = 0,
          int64_t shards = 1);
  // Starts a new epoch (reshuffling when enabled).
  void Reset();
  // Leaves out a last batch of fewer than `m` examples (default 1: none).
  void set_min_batch(int64_t m) { min_batch_ = m < 1 ? 1 : m; }
  // Fills the next batch (the last may be smaller); false at the epoch's end.
  bool Next(Tensor* images, Tensor* labels);
  int64_t num_batches() const { return size() / batch_size_ + (size() % batch_size_ >= min_batch_ ? 1 : 0); }
  int64_t size() const { return static_cast<int64_t>(order_.size()); }  // examples per epoch
  // Examples per epoch left out by set_min_batch.
  int64_t left_out() const { return size() % batch_size_ >= min_batch_ ? 0 : size() % batch_size_; }

 private:
  void TakeShard();

  const Dataset& data_;
  int64_t batch_size_;
  bool shuffle_;
  int64_t shard_, shards_;
  std::mt19937_64 rng_;
  std::vector<int64_t> all_;    // the epoch's order of every example
  std::vector<int64_t> order_;  // this shard's part of it
  int64_t pos_ = 0;
  int64_t min_batch_ = 1;
};

}  // namespace oar
