// NumPy files as Tensors (common/data/npy.h): arrays numpy wrote
// (tests/testdata/paddle_data/mlp, by make_data_fixtures.py) read back to
// the values of the fixture's batches; .npz (deflated) equal to the .npy
// files; format 2.0 headers and Fortran order; every malformed file an
// error naming it and the fault.
#include "common/data/npy.h"

#include <cstring>
#include <fstream>
#include <string>

#include "common/framework/tensor_io.h"
#include "gtest/gtest.h"
#include "tests/util/build_paths.h"
#include "tests/util/npy_bytes.h"

namespace oar {
namespace {

const std::string kDir = TestdataDir() + "/paddle_data/mlp";

std::string Npy(const std::string& header, const std::string& data, int major = 1) {
  return NpyBytes(header, data, major);
}

template <typename T>
std::string Bytes(std::initializer_list<T> v) {
  return RawBytes(std::vector<T>(v));
}

TEST(NpyTest, ReadsWhatNumpySavedAsTheFixturesBatches) {
  auto x = ReadNpy(kDir + "/npy/x.npy");
  auto label = ReadNpy(kDir + "/npy/label.npy");
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE(label.ok()) << label.status();
  EXPECT_EQ(x->dtype(), DataType::kFloat32);
  EXPECT_EQ(label->dtype(), DataType::kInt64);
  ASSERT_EQ(x->dims()[0], 64);
  // Batch 1 of the fixture is rows 16..31.
  Tensor b1;
  std::ifstream in(TestdataDir() + "/paddle/mlp/batch_1.x", std::ios::binary);
  ASSERT_TRUE(ReadLoDTensor(in, "batch_1.x", &b1).ok());
  ASSERT_EQ(b1.numel() * 4, x->numel());
  EXPECT_EQ(std::memcmp(b1.data<float>(), x->data<float>() + b1.numel(), b1.numel() * sizeof(float)), 0);
}

TEST(NpyTest, NpzMembersEqualTheNpyFiles) {
  auto arrays = ReadNpz(kDir + "/arrays.npz");
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  ASSERT_EQ(arrays->size(), 2u);
  for (const char* name : {"x", "label"}) {
    auto one = ReadNpy(kDir + "/npy/" + name + ".npy");
    ASSERT_TRUE(one.ok());
    const Tensor& z = arrays->at(name);
    ASSERT_EQ(z.dims(), one->dims()) << name;
    EXPECT_EQ(std::memcmp(z.raw_data(), one->raw_data(), z.numel() * SizeOf(z.dtype())), 0) << name;
  }
  auto missing = ReadNpz(kDir + "/npy/x.npy");  // not a zip
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("not a readable .npz"), std::string::npos) << missing.status();
}

TEST(NpyTest, FormatTwoHeadersAndFortranOrder) {
  auto v2 =
      ParseNpy(Npy("{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", Bytes<int32_t>({7, 8, 9}), 2), "v2");
  ASSERT_TRUE(v2.ok()) << v2.status();
  EXPECT_EQ(v2->dims(), DDim({3}));
  EXPECT_EQ(v2->data<int32_t>()[2], 9);
  // [[1, 2, 3], [4, 5, 6]] stored column by column.
  auto f = ParseNpy(
      Npy("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", Bytes<double>({1, 4, 2, 5, 3, 6})), "fortran");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->dims(), DDim({2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(f->data<double>()[i], i + 1);
  auto scalar = ParseNpy(Npy("{'descr': '|b1', 'fortran_order': False, 'shape': (), }", std::string(1, '\1')), "s");
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->numel(), 1);
}

TEST(NpyTest, WrittenArraysReadBackEqual) {
  const std::string dir = ::testing::TempDir();
  Tensor a, b, c;
  std::vector<float> av = {1.5f, -2, 3, 4, 5, 6};
  std::copy(av.begin(), av.end(), a.mutable_data<float>(DDim{2, 3}));
  int64_t* bp = b.mutable_data<int64_t>(DDim{5});
  for (int i = 0; i < 5; ++i) bp[i] = int64_t{1} << (10 * i);
  c.mutable_data<uint8_t>(DDim{})[0] = 7;
  for (const Tensor* t : {&a, &b, &c}) {
    const std::string path = dir + "/w.npy";
    ASSERT_TRUE(WriteNpy(path, *t).ok());
    auto back = ReadNpy(path);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->dims(), t->dims());
    EXPECT_EQ(back->dtype(), t->dtype());
    EXPECT_EQ(std::memcmp(back->raw_data(), t->raw_data(), t->numel() * SizeOf(t->dtype())), 0);
  }
}

TEST(NpyTest, MalformedFilesAreErrorsNamingFileAndFault) {
  struct Case {
    std::string bytes, want;
  };
  const std::string f4 = Bytes<float>({1, 2});
  const Case cases[] = {
      {"PK\3\4 not numpy", "not an .npy file"},
      {Npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f4), "big-endian"},
      {Npy("{'descr': '<u4', 'fortran_order': False, 'shape': (2,), }", f4), "'<u4' has no Oar type"},
      {Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f4), "(truncated)"},
      {Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f4), "holds 8 bytes of data"},
      {Npy("{'descr': '<f4', 'fortran_order': False, }", f4), "has no 'shape'"},
      {Npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", f4), "not a simple dtype"},
      {Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f4, 4), "version 4"},
  };
  for (const Case& c : cases) {
    auto t = ParseNpy(c.bytes, "bad.npy");
    ASSERT_FALSE(t.ok()) << c.want;
    EXPECT_NE(t.status().message().find("bad.npy: "), std::string::npos) << t.status();
    EXPECT_NE(t.status().message().find(c.want), std::string::npos) << t.status();
  }
}

}  // namespace
}  // namespace oar
