#include "common/data/batcher.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace oar {

Batcher::Batcher(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed, int64_t shard, int64_t shards)
    : data_(data),
      batch_size_(std::max<int64_t>(1, batch_size)),
      shuffle_(shuffle),
      shard_(shard),
      shards_(std::max<int64_t>(1, shards)),
      rng_(seed) {
  all_.resize(static_cast<size_t>(data.size()));
  std::iota(all_.begin(), all_.end(), 0);
  TakeShard();
}

void Batcher::TakeShard() {
  order_.clear();
  for (size_t p = static_cast<size_t>(shard_); p < all_.size(); p += static_cast<size_t>(shards_)) {
    order_.push_back(all_[p]);
  }
}

void Batcher::Reset() {
  pos_ = 0;
  if (shuffle_) {
    std::shuffle(all_.begin(), all_.end(), rng_);
    TakeShard();
  }
}

bool Batcher::Next(Tensor* images, Tensor* labels) {
  const int64_t n = static_cast<int64_t>(order_.size());
  if (pos_ >= n) return false;
  const int64_t b = std::min(batch_size_, n - pos_);
  if (b < min_batch_) return false;
  const int64_t width = data_.images.dims()[1];
  float* x = images->mutable_data<float>(DDim{b, width});
  int64_t* y = labels->mutable_data<int64_t>(DDim{b, 1});
  const float* src = data_.images.data<float>();
  const int64_t* lab = data_.labels.data<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    const int64_t row = order_[pos_ + i];
    std::memcpy(x + i * width, src + row * width, sizeof(float) * width);
    y[i] = lab[row];
  }
  pos_ += b;
  return true;
}

}  // namespace oar
