// SparseTable: rows made on first use from a (seed, id) initializer,
// followers sharing the primary's rows, concurrent creation, and the
// SelectedRows file layout round trip.
#include "common/framework/sparse_table.h"

#include <sstream>
#include <thread>

#include "common/framework/sparse_table_io.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(SparseTableTest, ARowsInitialValueDependsOnSeedAndIdNotOnOrder) {
  const RowInitializer init{RowInitializer::Kind::kUniform, -1, 1, 42};
  SparseTable a, b;
  ASSERT_TRUE(a.Configure(5).ok());
  ASSERT_TRUE(b.Configure(5).ok());
  a.SetInitializer(init);
  b.SetInitializer(init);
  const std::vector<int64_t> ids = {9, 3, int64_t{1} << 50, 77};
  std::vector<float> ra(20), rb(20);
  a.Lookup(ids.data(), 4, ra.data());
  const std::vector<int64_t> reversed(ids.rbegin(), ids.rend());
  std::vector<float> tmp(20);
  b.Lookup(reversed.data(), 4, tmp.data());
  b.Lookup(ids.data(), 4, rb.data());
  EXPECT_EQ(ra, rb);
  EXPECT_NE(std::vector<float>(ra.begin(), ra.begin() + 5), std::vector<float>(ra.begin() + 5, ra.begin() + 10));
  for (float v : ra) EXPECT_TRUE(v >= -1 && v < 1) << v;
  EXPECT_EQ(a.size(), 4);
  // One batch naming a new id twice makes one row, given to both.
  const std::vector<int64_t> twice = {500, 9, 500};
  std::vector<float> rt(15);
  a.Lookup(twice.data(), 3, rt.data());
  EXPECT_EQ(a.size(), 5);
  EXPECT_EQ(std::vector<float>(rt.begin(), rt.begin() + 5), std::vector<float>(rt.begin() + 10, rt.end()));
  EXPECT_EQ(std::vector<float>(rt.begin() + 5, rt.begin() + 10), std::vector<float>(ra.begin(), ra.begin() + 5));
  SparseTable g;
  ASSERT_TRUE(g.Configure(4).ok());
  g.SetInitializer({RowInitializer::Kind::kGaussian, 2.0f, 0.5f, 7});
  double sum = 0;
  for (int64_t id = 0; id < 2000; ++id) {
    const float* r = g.FindOrCreate(id);
    for (int k = 0; k < 4; ++k) sum += r[k];
  }
  EXPECT_NEAR(sum / 8000, 2.0, 0.05);
}

TEST(SparseTableTest, AFollowerHoldsOneRowPerPrimaryRow) {
  SparseTable p, m;
  ASSERT_TRUE(p.Configure(2).ok());
  m.SetInitializer({RowInitializer::Kind::kConstant, 0.25f, 0});
  ASSERT_TRUE(m.Follow(p).ok());
  EXPECT_TRUE(m.following());
  EXPECT_EQ(m.width(), 2);
  float* row = nullptr;
  const int64_t r = p.IndexOf(100, &row);
  float* mrow = m.FollowerRow(r, 100);
  EXPECT_EQ(mrow[0], 0.25f);
  mrow[1] = 3;
  EXPECT_EQ(m.FollowerRow(r, 100)[1], 3);  // made once
  SparseTable other;
  EXPECT_FALSE(m.Follow(other).ok());
  EXPECT_FALSE(p.Follow(p).ok());
  std::vector<std::pair<int64_t, float>> seen;
  p.FindOrCreate(7);
  m.ForEach([&](int64_t id, const float* v) { seen.emplace_back(id, v[1]); });
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, float>>{{100, 3.0f}, {7, 0.25f}}));
}

TEST(SparseTableTest, ConcurrentLookupsMakeEachRowOnce) {
  SparseTable t;
  ASSERT_TRUE(t.Configure(8).ok());
  t.SetInitializer({RowInitializer::Kind::kUniform, 0, 1, 3});
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> out(4, std::vector<float>(20000 * 8));
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      std::vector<int64_t> ids(20000);
      for (int64_t i = 0; i < 20000; ++i) ids[i] = (i * 7919 + k) % 20000;
      std::vector<float> rows(20000 * 8);
      t.Lookup(ids.data(), 20000, rows.data());
      for (int64_t i = 0; i < 20000; ++i) {
        std::copy(rows.begin() + i * 8, rows.begin() + (i + 1) * 8, out[k].begin() + ids[i] * 8);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.size(), 20000);
  for (int k = 1; k < 4; ++k) EXPECT_EQ(out[k], out[0]);
}

TEST(SparseTableTest, SavesAndLoadsAsFluidSelectedRows) {
  SparseTable t;
  ASSERT_TRUE(t.Configure(3).ok());
  t.set_declared_height(500);
  t.SetInitializer({RowInitializer::Kind::kUniform, -1, 1, 9});
  for (int64_t id : {int64_t{42}, int64_t{7}, int64_t{1} << 33}) t.FindOrCreate(id);
  std::stringstream buf;
  ASSERT_TRUE(WriteSparseTable(t, buf).ok());
  // Fluid's layout: version, row count, ids, height, then the tensor record.
  const std::string bytes = buf.str();
  uint32_t version;
  uint64_t n;
  std::memcpy(&version, bytes.data(), 4);
  std::memcpy(&n, bytes.data() + 4, 8);
  EXPECT_EQ(version, 0u);
  EXPECT_EQ(n, 3u);
  int64_t first_id, height;
  std::memcpy(&first_id, bytes.data() + 12, 8);
  std::memcpy(&height, bytes.data() + 12 + 24, 8);
  EXPECT_EQ(first_id, 42);
  EXPECT_EQ(height, 500);
  SparseTable back;
  ASSERT_TRUE(ReadSparseTable(buf, "test", &back).ok());
  EXPECT_EQ(back.size(), 3);
  for (int64_t id : {int64_t{42}, int64_t{7}, int64_t{1} << 33}) {
    ASSERT_NE(back.Find(id), nullptr);
    EXPECT_EQ(std::vector<float>(back.Find(id), back.Find(id) + 3), std::vector<float>(t.Find(id), t.Find(id) + 3));
  }
  std::stringstream truncated(bytes.substr(0, bytes.size() - 5));
  SparseTable bad;
  absl::Status s = ReadSparseTable(truncated, "shard.bin", &bad);
  EXPECT_NE(s.message().find("shard.bin"), std::string::npos) << s;
  SparseTable narrow;
  ASSERT_TRUE(narrow.Configure(2).ok());
  std::stringstream again(bytes);
  EXPECT_NE(ReadSparseTable(again, "x", &narrow).message().find("width 3"), std::string::npos);
}

}  // namespace
}  // namespace oar
