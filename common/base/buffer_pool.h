// BufferPool: tensor memory that comes back. A tensor given a buffer from a
// pool (Tensor::mutable_data_pooled) returns it to the pool, instead of
// freeing it, when the last tensor holding it lets go; the next buffer of
// that size is taken from what came back, with its pages still mapped.
//
// Why: an RPC connection receives the same gradients every step, into
// buffers that the receiver keeps for a while (a pserver's merge buffer
// lives until the parameter's optimize block ran) and then drops. Freed,
// each large buffer costs its page faults again on the next step (a
// pserver maps large allocations: malloc_tuning.h) — 200 faults for an
// 800 KB gradient, more than copying it. Kept here, bounded in blocks and
// bytes, it costs nothing; what does not fit is freed.
//
// A block comes back only when every tensor sharing it has dropped it
// (shared ownership), so whoever read it is done: no reuse while a reader
// remains, and the reference count orders those reads before the reuse.
//
//   auto pool = std::make_shared<BufferPool>();
//   t.Resize(dims);
//   void* p = t.mutable_data_pooled(DataType::kFloat32, pool);
//
// Thread-safety: safe for concurrent use. Blocks may outlive their pool's
// other owners: each holds the pool.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace oar {

class BufferPool {
 public:
  // Blocks smaller than this are not kept (malloc serves them well).
  static constexpr size_t kMinKeptBytes = 16 * 1024;
  explicit BufferPool(size_t max_kept_blocks = 16, size_t max_kept_bytes = size_t{32} << 20)
      : max_blocks_(max_kept_blocks), max_bytes_(max_kept_bytes) {}
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  struct Block {
    void* ptr;
    size_t bytes;  // usable, >= what was asked
  };
  // A 64-byte-aligned block of at least `bytes`: the smallest kept one that
  // fits without wasting more than half of it, else a new one.
  Block Take(size_t bytes);
  // Keeps `b` for a later Take, or frees it when the pool is full.
  void Give(Block b);

  size_t kept_blocks();  // for tests

 private:
  const size_t max_blocks_, max_bytes_;
  absl::Mutex mu_;
  std::vector<Block> kept_ ABSL_GUARDED_BY(mu_);
  size_t kept_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace oar
