#include "common/framework/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "common/base/buffer_pool.h"
#include "common/framework/scope.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(DDimTest, ProductsAndFlatten) {
  DDim d{2, 3, 4};
  EXPECT_EQ(d.numel(), 24);
  EXPECT_EQ(d.FlattenTo2D(1), (DDim{2, 12}));
  EXPECT_EQ(d.FlattenTo2D(2), (DDim{6, 4}));
  EXPECT_EQ((DDim{-1, 4}).numel(), -1);
  EXPECT_EQ(d.ToString(), "[2, 3, 4]");
}

TEST(TensorTest, ReusesBufferWhenShrinking) {
  Tensor t;
  float* a = t.mutable_data<float>(DDim{4, 4});
  float* b = t.mutable_data<float>(DDim{2, 4});
  EXPECT_EQ(a, b);
  float* c = t.mutable_data<float>(DDim{8, 8});
  EXPECT_NE(c, nullptr);
  EXPECT_EQ(t.nbytes(), 256u);
}

TEST(TensorTest, CopiesShareButCopyFromIsDeep) {
  Tensor a = MakeTensor<float>({3}, {1, 2, 3});
  Tensor shared = a;
  Tensor deep;
  deep.CopyFrom(a);
  a.data<float>()[0] = 9;
  EXPECT_EQ(shared.data<float>()[0], 9);
  EXPECT_EQ(deep.data<float>()[0], 1);
}

TEST(TensorTest, SliceViewsRows) {
  Tensor a = MakeTensor<int64_t>({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor s = a.Slice(1, 3);
  EXPECT_EQ(s.dims(), (DDim{2, 2}));
  EXPECT_EQ(TensorToVector<int64_t>(s), (std::vector<int64_t>{3, 4, 5, 6}));
}

// A tensor over memory the process may only read (PROT_READ: a write would
// fault) is read in place, and mutable_data gives it a buffer of its own
// rather than writing there, even when nothing else shares it.
TEST(TensorTest, ReadOnlyMemoryIsReadInPlaceAndNeverWritten) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  const float values[4] = {1.5f, -2.0f, 3.25f, 0.5f};
  std::memcpy(mem, values, sizeof(values));
  ASSERT_EQ(mprotect(mem, page, PROT_READ), 0);
  auto unmap = std::shared_ptr<void>(mem, [page](void* p) { munmap(p, page); });
  {
    Tensor t = Tensor::OverReadOnlyMemory(mem, DDim{2, 2}, DataType::kFloat32, unmap);
    EXPECT_FALSE(t.Writable());
    EXPECT_TRUE(t.OverForeignMemory());
    EXPECT_EQ(t.raw_data(), mem);
    EXPECT_EQ(t.data<float>()[2], 3.25f);
    Tensor copy;
    copy.CopyFrom(t);
    EXPECT_TRUE(copy.Writable());
    EXPECT_EQ(std::memcmp(copy.raw_data(), values, sizeof(values)), 0);

    float* out = t.mutable_data<float>();  // same shape, unshared: still not written in place
    EXPECT_NE(static_cast<void*>(out), mem);
    EXPECT_TRUE(t.Writable());
    out[0] = 9.0f;
    EXPECT_EQ(static_cast<const float*>(mem)[0], 1.5f);

    Tensor pooled = Tensor::OverReadOnlyMemory(mem, DDim{4}, DataType::kFloat32, unmap);
    auto pool = std::make_shared<BufferPool>();
    EXPECT_NE(pooled.mutable_data_pooled(DataType::kFloat32, pool), mem);
  }
  EXPECT_EQ(unmap.use_count(), 1);  // the tensors let go of the mapping
}

TEST(ScopeTest, FindsVariablesThroughParentsAndDropsKids) {
  Scope global;
  global.Var("w")->GetMutable<Tensor>();
  Scope& local = global.NewScope();
  local.Var("tmp");
  EXPECT_NE(local.FindVar("w"), nullptr);
  EXPECT_EQ(local.FindLocalVar("w"), nullptr);
  EXPECT_EQ(global.FindVar("tmp"), nullptr);
  Variable* shadow = local.Var("w");  // Var creates in this scope, shadowing the parent
  EXPECT_EQ(shadow, local.FindLocalVar("w"));
  EXPECT_NE(shadow, global.FindVar("w"));
  global.DeleteScope(&local);
  EXPECT_EQ(global.LocalVarNames(), (std::vector<std::string>{"w"}));
}

TEST(VariableTest, HoldsOneKindAtATime) {
  Variable v;
  EXPECT_FALSE(v.IsInitialized());
  v.GetMutable<Tensor>()->mutable_data<float>(DDim{1})[0] = 3;
  EXPECT_TRUE(v.IsType<Tensor>());
  v.GetMutable<SelectedRows>()->rows = {1, 2};
  EXPECT_FALSE(v.IsType<Tensor>());
  EXPECT_EQ(v.Get<SelectedRows>().rows.size(), 2u);
}

// A negative element count used to wrap to a tiny allocation (the assert
// that caught it is compiled out in Release); now it stops the process with
// the dims, before anything writes past the buffer.
TEST(TensorDeathTest, MutableDataWithANegativeDimensionDies) {
  Tensor t;
  EXPECT_DEATH(t.mutable_data<float>(DDim{-1, 3}), "negative dimension");
}

TEST(TensorDeathTest, MutableDataWhoseByteCountOverflowsDies) {
  Tensor t;
  EXPECT_DEATH(t.mutable_data<float>(DDim{int64_t{1} << 40, int64_t{1} << 30}), "overflows");
}

}  // namespace
}  // namespace oar
