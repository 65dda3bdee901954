#include "common/framework/tensor_io.h"

#include <sstream>

#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(TensorIoTest, RoundTripsDataShapeDtypeAndLoD) {
  Tensor a = MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  a.set_lod({{0, 1, 2}});
  Tensor b = MakeTensor<int64_t>({4}, {7, 8, 9, 10});
  std::stringstream buf;
  ASSERT_TRUE(WriteLoDTensor(a, buf).ok());
  ASSERT_TRUE(WriteLoDTensor(b, buf).ok());
  Tensor ra, rb;
  ASSERT_TRUE(ReadLoDTensor(buf, "buf", &ra).ok());
  ASSERT_TRUE(ReadLoDTensor(buf, "buf", &rb).ok());
  EXPECT_EQ(ra.dims(), a.dims());
  EXPECT_EQ(ra.lod(), a.lod());
  EXPECT_EQ(TensorToVector<float>(ra), TensorToVector<float>(a));
  EXPECT_EQ(rb.dtype(), DataType::kInt64);
  EXPECT_EQ(TensorToVector<int64_t>(rb), TensorToVector<int64_t>(b));
}

TEST(TensorIoTest, LayoutIsFluids) {
  std::stringstream buf;
  ASSERT_TRUE(WriteLoDTensor(MakeTensor<float>({1}, {2.5f}), buf).ok());
  std::string s = buf.str();
  // uint32 0, uint64 0 (no LoD), uint32 0, int32 desc size, desc, 4 data bytes.
  ASSERT_GE(s.size(), 20u);
  EXPECT_EQ(s.substr(0, 16), std::string(16, '\0'));
  int32_t desc_size;
  std::memcpy(&desc_size, s.data() + 16, 4);
  EXPECT_EQ(s.size(), 20u + desc_size + 4);
  float v;
  std::memcpy(&v, s.data() + s.size() - 4, 4);
  EXPECT_EQ(v, 2.5f);
}

TEST(TensorIoTest, TruncatedOrCorruptRecordsAreNamedErrors) {
  std::stringstream buf;
  ASSERT_TRUE(WriteLoDTensor(MakeTensor<float>({3}, {1, 2, 3}), buf).ok());
  std::string s = buf.str();
  for (size_t cut : {size_t{2}, size_t{10}, size_t{22}, s.size() - 1}) {
    std::stringstream in(s.substr(0, cut));
    Tensor t;
    absl::Status st = ReadLoDTensor(in, "w.bin", &t);
    EXPECT_FALSE(st.ok()) << cut;
    EXPECT_NE(st.message().find("w.bin"), std::string::npos);
  }
  std::string bad = s;
  bad[0] = 7;
  std::stringstream in(bad);
  Tensor t;
  EXPECT_NE(ReadLoDTensor(in, "w.bin", &t).message().find("version 7"), std::string::npos);
}

}  // namespace
}  // namespace oar
