#include "common/data/fashion_mnist.h"

#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/data/batcher.h"
#include "common/data/idx_file.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

class IdxFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("oar_idx_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes an IDX file (gzip when the name ends in .gz).
  std::string Write(const std::string& name, const std::string& bytes) {
    std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), name.size() > 3 && name.substr(name.size() - 3) == ".gz" ? "wb" : "wbT");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    return path;
  }
  static std::string Header(uint8_t rank, std::vector<uint32_t> dims) {
    std::string h = {0, 0, 8, static_cast<char>(rank)};
    for (uint32_t d : dims) {
      for (int s = 24; s >= 0; s -= 8) h.push_back(static_cast<char>((d >> s) & 0xff));
    }
    return h;
  }
  std::filesystem::path dir_;
};

TEST_F(IdxFileTest, ReadsGzipAndPlainFiles) {
  std::string body = Header(2, {2, 3}) + std::string("\x01\x02\x03\x04\x05\x06", 6);
  for (const char* name : {"a.gz", "a.idx"}) {
    auto a = ReadIdxFile(Write(name, body));
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a->data[5], 6);
  }
}

TEST_F(IdxFileTest, MalformedFilesAreNamedErrors) {
  auto truncated = ReadIdxFile(Write("t.gz", Header(2, {2, 3}) + "\x01"));
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(truncated.status().message().find("t.gz"), std::string::npos);
  auto magic = ReadIdxFile(Write("m.gz", "\x01\x02\x03\x04"));
  EXPECT_FALSE(magic.ok());
  auto trailing = ReadIdxFile(Write("x.gz", Header(1, {1}) + "ab"));
  EXPECT_NE(trailing.status().message().find("trailing"), std::string::npos);
  auto missing = ReadIdxFile((dir_ / "nope.gz").string());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(IdxFileTest, MissingDatasetSaysHowToGetIt) {
  auto ds = LoadFashionMnist(dir_.string(), "train");
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(ds.status().message().find("dataset-fashion-mnist"), std::string::npos) << ds.status();
}

TEST_F(IdxFileTest, LoadsASmallDatasetAndBatchesIt) {
  std::string pixels(5 * 4, '\0');
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<char>(i * 10);
  Write("train-images-idx3-ubyte.gz", Header(3, {5, 2, 2}) + pixels);
  Write("train-labels-idx1-ubyte.gz", Header(1, {5}) + std::string("\x00\x01\x02\x03\x04", 5));
  auto ds = LoadFashionMnist(dir_.string(), "train");
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->images.dims(), (DDim{5, 4}));
  EXPECT_FLOAT_EQ(ds->images.data<float>()[1], 10.0f / 255.0f);
  Batcher b(*ds, 2, /*shuffle=*/false);
  b.Reset();
  Tensor x, y;
  std::vector<int64_t> sizes;
  while (b.Next(&x, &y)) sizes.push_back(x.dims()[0]);
  EXPECT_EQ(sizes, (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(y.data<int64_t>()[0], 4);
  EXPECT_EQ(b.num_batches(), 3);
  EXPECT_EQ(b.left_out(), 0);

  // Split across two places, the one-example tail is left out of the epoch.
  b.set_min_batch(2);
  b.Reset();
  sizes.clear();
  while (b.Next(&x, &y)) sizes.push_back(x.dims()[0]);
  EXPECT_EQ(sizes, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(b.num_batches(), 2);
  EXPECT_EQ(b.left_out(), 1);
  EXPECT_EQ(y.data<int64_t>()[1], 3);
}

TEST_F(IdxFileTest, RejectsLabelsOutsideTenClasses) {
  Write("t10k-images-idx3-ubyte.gz", Header(3, {1, 1, 1}) + std::string("\x00", 1));
  Write("t10k-labels-idx1-ubyte.gz", Header(1, {1}) + std::string("\x0c", 1));
  auto ds = LoadFashionMnist(dir_.string(), "t10k");
  EXPECT_NE(ds.status().message().find("label 12"), std::string::npos) << ds.status();
}

}  // namespace
}  // namespace oar
