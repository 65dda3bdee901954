#include "common/base/buffer_pool.h"

#include <cstdlib>

#include "glog/logging.h"

namespace oar {
namespace {

constexpr size_t kAlignment = 64;

void* Allocate(size_t bytes) {
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (p == nullptr) LOG(FATAL) << "BufferPool: cannot allocate " << bytes << " bytes";
  return p;
}

}  // namespace

BufferPool::~BufferPool() {
  for (const Block& b : kept_) std::free(b.ptr);
}

BufferPool::Block BufferPool::Take(size_t bytes) {
  const size_t rounded = bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded >= kMinKeptBytes) {
    absl::MutexLock l(&mu_);
    size_t best = kept_.size();
    for (size_t i = 0; i < kept_.size(); ++i) {
      const size_t have = kept_[i].bytes;
      if (have >= rounded && have / 2 <= rounded && (best == kept_.size() || have < kept_[best].bytes)) best = i;
    }
    if (best != kept_.size()) {
      Block b = kept_[best];
      kept_[best] = kept_.back();
      kept_.pop_back();
      kept_bytes_ -= b.bytes;
      return b;
    }
  }
  return Block{Allocate(rounded), rounded};
}

void BufferPool::Give(Block b) {
  if (b.bytes >= kMinKeptBytes) {
    absl::MutexLock l(&mu_);
    if (kept_.size() < max_blocks_ && kept_bytes_ + b.bytes <= max_bytes_) {
      kept_.push_back(b);
      kept_bytes_ += b.bytes;
      return;
    }
  }
  std::free(b.ptr);
}

size_t BufferPool::kept_blocks() {
  absl::MutexLock l(&mu_);
  return kept_.size();
}

}  // namespace oar
