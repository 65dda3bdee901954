// BufferPool through the path the stream transports take: tensors given
// pooled buffers (Tensor::mutable_data_pooled) return them when the last
// tensor holding them lets go, and the next take of that size gets the same
// memory; the pool's bounds hold; blocks outlive the pool's other owners.
#include "common/base/buffer_pool.h"

#include <memory>

#include "common/framework/tensor.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(BufferPoolTest, ABufferComesBackOnlyWhenItsLastTensorLetsGo) {
  auto pool = std::make_shared<BufferPool>();
  Tensor a;
  a.Resize({1 << 16});
  void* first = a.mutable_data_pooled(DataType::kFloat32, pool);
  Tensor view = a;  // shares it
  a = Tensor();
  EXPECT_EQ(pool->kept_blocks(), 0u) << "returned while a tensor still held it";
  view = Tensor();
  EXPECT_EQ(pool->kept_blocks(), 1u);
  Tensor b;
  b.Resize({1 << 16});
  EXPECT_EQ(b.mutable_data_pooled(DataType::kFloat32, pool), first) << "the same size takes the kept block";
  EXPECT_EQ(pool->kept_blocks(), 0u);
}

TEST(BufferPoolTest, TakesTheSmallestFittingBlockAndNeverOneTwiceTooLarge) {
  auto pool = std::make_shared<BufferPool>();
  const BufferPool::Block big = pool->Take(1 << 20), mid = pool->Take(300 << 10), small = pool->Take(100 << 10);
  pool->Give(big);
  pool->Give(mid);
  pool->Give(small);
  const BufferPool::Block got = pool->Take(280 << 10);
  EXPECT_EQ(got.ptr, mid.ptr);
  EXPECT_GE(got.bytes, size_t{280} << 10);
  const BufferPool::Block tiny = pool->Take(20 << 10);  // 100 KiB would waste more than half
  EXPECT_NE(tiny.ptr, small.ptr);
  EXPECT_EQ(pool->kept_blocks(), 2u);
  pool->Give(got);
  pool->Give(tiny);
}

TEST(BufferPoolTest, KeepsNoMoreThanItsBoundsAndNoSmallBlocks) {
  auto pool = std::make_shared<BufferPool>(/*max_kept_blocks=*/2, /*max_kept_bytes=*/size_t{1} << 20);
  BufferPool::Block blocks[4];
  for (auto& b : blocks) b = pool->Take(256 << 10);
  for (auto& b : blocks) pool->Give(b);
  EXPECT_EQ(pool->kept_blocks(), 2u);
  pool->Give(pool->Take(100));  // below kMinKeptBytes: freed
  EXPECT_EQ(pool->kept_blocks(), 2u);
  auto bytes = std::make_shared<BufferPool>(/*max_kept_blocks=*/16, /*max_kept_bytes=*/size_t{600} << 10);
  for (auto& b : blocks) b = bytes->Take(256 << 10);
  for (auto& b : blocks) bytes->Give(b);
  EXPECT_EQ(bytes->kept_blocks(), 2u);  // a third would pass 600 KiB
}

TEST(BufferPoolTest, ATensorOutlivesItsPoolsOtherOwners) {
  Tensor t;
  {
    auto pool = std::make_shared<BufferPool>();
    t.Resize({1 << 15});
    float* p = static_cast<float*>(t.mutable_data_pooled(DataType::kFloat32, pool));
    p[0] = 1.5f;
  }
  EXPECT_EQ(t.data<float>()[0], 1.5f);
  t = Tensor();  // gives the block back to the pool it keeps alive, which then frees it (ASan checks)
}

TEST(BufferPoolTest, AFittingOwnBufferIsKeptAndASharedOneReplaced) {
  auto pool = std::make_shared<BufferPool>();
  Tensor t;
  t.Resize({1 << 14});
  void* own = t.mutable_data(DataType::kFloat32);
  EXPECT_EQ(t.mutable_data_pooled(DataType::kFloat32, pool), own);
  Tensor view = t;
  void* fresh = t.mutable_data_pooled(DataType::kFloat32, pool);
  EXPECT_NE(fresh, own) << "wrote into a buffer another tensor shares";
  EXPECT_EQ(view.raw_data(), own);
}

}  // namespace
}  // namespace oar
