#include "common/data/batcher.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace oar {

Batcher::Batcher(const Dataset& data, int64_t batch_size, bool shuffle, uint64_t seed)
    : data_(data), batch_size_(std::max<int64_t>(1, batch_size)), shuffle_(shuffle), rng_(seed) {
  order_.resize(static_cast<size_t>(data.size()));
  std::iota(order_.begin(), order_.end(), 0);
}

void Batcher::Reset() {
  pos_ = 0;
  if (shuffle_) std::shuffle(order_.begin(), order_.end(), rng_);
}

bool Batcher::Next(Tensor* images, Tensor* labels) {
  const int64_t n = data_.size();
  if (pos_ >= n) return false;
  const int64_t b = std::min(batch_size_, n - pos_);
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
