// The data layer's sources (common/data/): ArraySource's shards and
// shuffles, MultiSlotSource's sharding by file and by line and its
// in-memory shuffle, PrefetchSource giving exactly the inner source's
// batches, abandoning an epoch and passing errors on, and feed checking
// naming where the data came from.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/data/array_source.h"
#include "common/data/batcher.h"
#include "common/data/feed_check.h"
#include "common/data/multi_slot_source.h"
#include "common/data/prefetch_source.h"
#include "gtest/gtest.h"
#include "tests/util/oar_process.h"

namespace oar {
namespace {

// ids 0..n-1 as an int64 [n, 1] array "id" and float [n, 2] "v" = (id, -id).
std::map<std::string, Tensor> Arrays(int64_t n) {
  Tensor id, v;
  int64_t* ip = id.mutable_data<int64_t>(DDim{n, 1});
  float* vp = v.mutable_data<float>(DDim{n, 2});
  for (int64_t i = 0; i < n; ++i) ip[i] = i, vp[2 * i] = static_cast<float>(i), vp[2 * i + 1] = -static_cast<float>(i);
  return {{"id", id}, {"v", v}};
}

// Every id an epoch of `s` gives, in order; checks each batch's rows agree.
std::vector<int64_t> Epoch(FeedSource* s, int epoch, std::vector<int64_t>* sizes = nullptr) {
  std::vector<int64_t> ids;
  EXPECT_TRUE(s->StartEpoch(epoch).ok());
  FeedBatch b;
  while (true) {
    auto more = s->Next(&b);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    const Tensor& id = b.feeds.at("id");
    EXPECT_EQ(b.examples, id.dims()[0]);
    if (sizes) sizes->push_back(b.examples);
    for (int64_t i = 0; i < id.dims()[0]; ++i) {
      ids.push_back(id.data<int64_t>()[i]);
      if (b.feeds.count("v")) {
        EXPECT_EQ(b.feeds.at("v").data<float>()[2 * i + 1], -static_cast<float>(ids.back()));
      }
    }
  }
  return ids;
}

std::unique_ptr<ArraySource> Source(int64_t n, ArraySourceOptions o) {
  auto s = ArraySource::Make("test", Arrays(n), o);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

TEST(ArraySourceTest, InOrderWithTheLastBatchKeptOrDropped) {
  std::vector<int64_t> sizes;
  auto s = Source(10, {.batch_size = 4});
  EXPECT_EQ(s->batches_per_epoch(), 3);
  std::vector<int64_t> ids = Epoch(s.get(), 0, &sizes);
  EXPECT_EQ(ids, std::vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(sizes, std::vector<int64_t>({4, 4, 2}));
  auto d = Source(10, {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(d->batches_per_epoch(), 2);
  EXPECT_EQ(Epoch(d.get(), 0).size(), 8u);
}

TEST(ArraySourceTest, GlobalShuffleDealsDisjointSharesWhoseUnionIsTheData) {
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> all;
    std::vector<std::vector<int64_t>> shares;
    for (int64_t t = 0; t < 3; ++t) {
      auto s = Source(20, {.batch_size = 3, .shuffle = ArrayShuffle::kGlobal, .seed = 5, .shard = t, .shards = 3});
      shares.push_back(Epoch(s.get(), epoch));
      all.insert(all.end(), shares.back().begin(), shares.back().end());
    }
    std::sort(all.begin(), all.end());
    std::vector<int64_t> want(20);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(all, want) << "epoch " << epoch;
    EXPECT_EQ(shares[0].size(), 7u);
    EXPECT_EQ(shares[2].size(), 6u);  // uneven: 20 = 7 + 7 + 6
  }
  auto a = Source(20, {.batch_size = 3, .shuffle = ArrayShuffle::kGlobal, .seed = 5});
  EXPECT_NE(Epoch(a.get(), 0), Epoch(a.get(), 1));  // a new order each epoch
}

// oar train --model's Batcher and ArraySource walk Fashion-MNIST alike, so a
// --program job and its single-process reference see the same batches.
TEST(ArraySourceTest, GlobalShuffleWalksTheDataAsBatcherDoes) {
  Dataset d;
  float* x = d.images.mutable_data<float>(DDim{30, 1});
  int64_t* y = d.labels.mutable_data<int64_t>(DDim{30, 1});
  for (int i = 0; i < 30; ++i) x[i] = static_cast<float>(i), y[i] = i;
  for (int64_t shard : {0, 1}) {
    Batcher b(d, 4, /*shuffle=*/true, /*seed=*/3, shard, 2);
    auto a =
        ArraySource::Make("a", {{"id", d.labels}},
                          {.batch_size = 4, .shuffle = ArrayShuffle::kGlobal, .seed = 3, .shard = shard, .shards = 2});
    ASSERT_TRUE(a.ok());
    for (int epoch = 0; epoch < 3; ++epoch) {
      b.Reset();
      std::vector<int64_t> want;
      for (Tensor bx, by; b.Next(&bx, &by);)
        want.insert(want.end(), by.data<int64_t>(), by.data<int64_t>() + by.numel());
      EXPECT_EQ(Epoch(a->get(), epoch), want) << "shard " << shard << " epoch " << epoch;
    }
  }
}

TEST(ArraySourceTest, LocalShuffleKeepsEachSharesExamples) {
  auto s = Source(20, {.batch_size = 4, .shuffle = ArrayShuffle::kLocal, .seed = 5, .shard = 1, .shards = 2});
  std::vector<int64_t> e0 = Epoch(s.get(), 0), e1 = Epoch(s.get(), 1);
  EXPECT_NE(e0, e1);
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e0, e1);
  EXPECT_EQ(e0, std::vector<int64_t>({1, 3, 5, 7, 9, 11, 13, 15, 17, 19}));
}

TEST(ArraySourceTest, ArraysThatDisagreeOnExamplesAreRefused) {
  auto arrays = Arrays(5);
  arrays["id"] = Arrays(4)["id"];
  auto s = ArraySource::Make("npy:d", arrays, {.batch_size = 2});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'v' holds 5 examples, 'id' 4"), std::string::npos) << s.status();
}

TEST(PrefetchSourceTest, GivesTheInnerSourcesBatchesInOrderEveryEpoch) {
  PrefetchSource p(Source(23, {.batch_size = 2, .shuffle = ArrayShuffle::kGlobal, .seed = 3}), 2);
  auto plain = Source(23, {.batch_size = 2, .shuffle = ArrayShuffle::kGlobal, .seed = 3});
  EXPECT_EQ(p.batches_per_epoch(), 12);
  for (int epoch = 0; epoch < 3; ++epoch) EXPECT_EQ(Epoch(&p, epoch), Epoch(plain.get(), epoch)) << epoch;
}

TEST(PrefetchSourceTest, AStartedEpochAbandonsTheUnreadRest) {
  PrefetchSource p(Source(40, {.batch_size = 2}), 2);
  FeedBatch b;
  ASSERT_TRUE(p.StartEpoch(0).ok());
  ASSERT_TRUE(*p.Next(&b));  // one batch of epoch 0, then a new epoch
  EXPECT_EQ(Epoch(&p, 1).size(), 40u);
  ASSERT_TRUE(p.StartEpoch(2).ok());
  ASSERT_TRUE(p.StartEpoch(3).ok());  // twice without reading
  EXPECT_EQ(Epoch(&p, 4).front(), 0);
}  // destroyed with a reader waiting for room: must not hang

class Failing : public FeedSource {
 public:
  absl::Status StartEpoch(int) override { return absl::OkStatus(); }
  absl::StatusOr<bool> Next(FeedBatch*) override { return absl::DataLossError("file.txt:3: cut short"); }
  std::string Describe() const override { return "failing"; }
};

TEST(PrefetchSourceTest, AnErrorArrivesWhereItHappened) {
  PrefetchSource p(std::make_unique<Failing>());
  ASSERT_TRUE(p.StartEpoch(0).ok());
  FeedBatch b;
  auto r = p.Next(&b);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "file.txt:3: cut short");
  auto after = p.Next(&b);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(*after);
}

TEST(FeedCheckTest, ReshapesToTheVariableAndNamesEveryMismatch) {
  VarDesc img{.name = "img", .dtype = DataType::kFloat32, .shape = {-1, 1, 2, 2}};
  Tensor t;
  t.mutable_data<float>(DDim{3, 4});
  ASSERT_TRUE(FitFeedToVar(img, "array x.npy", &t).ok());
  EXPECT_EQ(t.dims(), DDim({3, 1, 2, 2}));
  Tensor wide;
  wide.mutable_data<float>(DDim{3, 5});
  absl::Status s = FitFeedToVar(img, "array x.npy", &wide);
  EXPECT_EQ(s.message(),
            "array x.npy for variable 'img': the data is [3, 5] (5 values per example); the variable is "
            "[-1, 1, 2, 2] (4 per example)");
  Tensor d;
  d.mutable_data<double>(DDim{3, 4});
  s = FitFeedToVar(img, "array x.npy", &d);
  EXPECT_NE(s.message().find("the data is float64, the variable float32"), std::string::npos) << s;
  VarDesc words{.name = "words", .dtype = DataType::kInt64, .shape = {-1, 1}, .lod_level = 1};
  Tensor ids;
  ids.mutable_data<int64_t>(DDim{3, 1});
  s = FitFeedToVar(words, "array words.npy", &ids);
  EXPECT_NE(s.message().find("lod_level 1"), std::string::npos) << s;
  VarDesc fixed{.name = "f", .dtype = DataType::kFloat32, .shape = {8, 4}};
  s = FitFeedToVar(fixed, "batch", &t);
  EXPECT_NE(s.message().find("fixes the batch at 8; this batch has 3"), std::string::npos) << s;
}

// Two MultiSlot files of ids 0..9 and 10..15, one sparse slot "id".
class MultiSlotSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("multi_slot_source");
    std::filesystem::create_directories(dir_);
    for (auto [file, lo, hi] : {std::tuple{"a", 0, 10}, std::tuple{"b", 10, 16}}) {
      std::ofstream f(dir_ + "/" + file);
      for (int i = lo; i < hi; ++i) f << "1 " << i << "\n";
    }
    auto d =
        DataFeedDesc::Parse(R"(batch_size: 4 multi_slot_desc { slots { name: "id" type: "uint64" is_used: true } })");
    ASSERT_TRUE(d.ok()) << d.status();
    desc_ = std::make_unique<DataFeedDesc>(*d);
  }
  std::vector<int64_t> Read(MultiSlotSourceOptions o, int epoch = 0) {
    auto s = MultiSlotSource::Make(*desc_, {&var_}, std::move(o));
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return {};
    return Epoch(s->get(), epoch);
  }
  std::string dir_;
  std::unique_ptr<DataFeedDesc> desc_;
  VarDesc var_{.name = "id", .dtype = DataType::kInt64, .shape = {-1, 1}, .lod_level = 1};
};

TEST_F(MultiSlotSourceTest, FilesAreDealtToTrainersAndLinesWhenFilesAreFewer) {
  const std::vector<std::string> both = {dir_ + "/a", dir_ + "/b"};
  EXPECT_EQ(Read({.files = both, .shard = 1, .shards = 2}), std::vector<int64_t>({10, 11, 12, 13, 14, 15}));
  std::vector<int64_t> all;
  for (int64_t t = 0; t < 3; ++t) {  // 3 trainers, 2 files: by line
    std::vector<int64_t> mine = Read({.files = both, .shard = t, .shards = 3});
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> want(16);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(all, want);
}

TEST_F(MultiSlotSourceTest, InMemoryShufflesItsLinesEachEpoch) {
  const std::vector<std::string> both = {dir_ + "/a", dir_ + "/b"};
  std::vector<int64_t> queue = Read({.files = both});
  std::vector<int64_t> e0 = Read({.files = both, .in_memory = true, .shuffle = true, .seed = 9}, 0);
  std::vector<int64_t> e1 = Read({.files = both, .in_memory = true, .shuffle = true, .seed = 9}, 1);
  EXPECT_NE(e0, queue);
  EXPECT_NE(e0, e1);
  std::sort(e0.begin(), e0.end());
  EXPECT_EQ(e0, queue);                                        // the same lines
  EXPECT_EQ(Read({.files = both, .in_memory = true}), queue);  // no shuffle: the files' order
}

TEST_F(MultiSlotSourceTest, SlotsAndVariablesMustMatchByName) {
  VarDesc other{.name = "word", .dtype = DataType::kInt64, .shape = {-1, 1}, .lod_level = 1};
  auto s = MultiSlotSource::Make(*desc_, {&other}, {.files = {dir_ + "/a"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("used slot 'id' is not one of the feed variables (word)"), std::string::npos)
      << s.status();
  std::ofstream(dir_ + "/bad") << "1 3\n2 4\n";  // line 2 says two ids, gives one
  auto bad = MultiSlotSource::Make(*desc_, {&var_}, {.files = {dir_ + "/bad"}});
  ASSERT_TRUE(bad.ok());
  FeedBatch b;
  auto r = (*bad)->Next(&b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(dir_ + "/bad:2"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace oar
