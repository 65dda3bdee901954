// MultiSlot files through MultiSlotDataFeed: batches equal hand-built
// tensors (LoD included) for sparse id, sparse float and dense slots;
// unused slots are skipped; a pipe command reads gzip'd files; every
// malformed line is an error naming file, line and slot, or is counted
// and skipped; threads sharing a FileQueue read every instance once.
#include "common/data/multi_slot_feed.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>

#include "gtest/gtest.h"

namespace oar {
namespace {

DataFeedDesc Desc(int batch, const std::string& pipe = "") {
  auto d = DataFeedDesc::Parse(
      absl::StrCat("batch_size: ", batch, pipe.empty() ? "" : " pipe_command: '" + pipe + "'",
                   " multi_slot_desc {"
                   "  slots { name: 'words' type: 'uint64' is_used: true }"
                   "  slots { name: 'skip' type: 'float' }"
                   "  slots { name: 'dense' type: 'float' is_dense: true is_used: true shape: [-1, 2] }"
                   "  slots { name: 'label' type: 'uint64' is_used: true } }"));
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/multi_slot_" + name;  // each case names its own files
  std::ofstream(path) << text;
  return path;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

TEST(MultiSlotFeedTest, BatchesEqualHandBuiltTensors) {
  const std::string f = Write("part-a",
                              "3 11 12 18446744073709551615 1 9.5 2 0.5 1.5 1 1\n"
                              "\n"
                              "1 7 2 1 2 2 -2.5 3 1 0\n"
                              "2 5 6 1 0 2 4 5 1 1\n");
  FileQueue files({f});
  FeedStats stats;
  MultiSlotDataFeed feed(Desc(2), &files, &stats);
  EXPECT_EQ(feed.names(), (std::vector<std::string>{"words", "dense", "label"}));
  std::vector<Tensor> b;
  auto more = feed.Next(&b);
  ASSERT_TRUE(more.ok()) << more.status();
  ASSERT_TRUE(*more);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].dims(), (DDim{4, 1}));
  EXPECT_EQ(Values<int64_t>(b[0]), (std::vector<int64_t>{11, 12, -1, 7}));  // uint64 bits kept
  EXPECT_EQ(b[0].lod(), (LoD{{0, 3, 4}}));
  EXPECT_EQ(b[1].dims(), (DDim{2, 2}));
  EXPECT_EQ(Values<float>(b[1]), (std::vector<float>{0.5f, 1.5f, -2.5f, 3.0f}));
  EXPECT_TRUE(b[1].lod().empty());
  EXPECT_EQ(Values<int64_t>(b[2]), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(b[2].lod(), (LoD{{0, 1, 2}}));
  more = feed.Next(&b);  // the last, smaller batch
  ASSERT_TRUE(more.ok() && *more);
  EXPECT_EQ(b[1].dims(), (DDim{1, 2}));
  EXPECT_EQ(Values<int64_t>(b[0]), (std::vector<int64_t>{5, 6}));
  more = feed.Next(&b);
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(*more);
  EXPECT_EQ(stats.instances.load(), 3);
}

TEST(MultiSlotFeedTest, APipeCommandReadsGzippedFiles) {
  const std::string f = Write("part-z", "1 3 1 0 2 1 2 1 1\n1 4 1 0 2 3 4 1 0\n");
  ASSERT_EQ(std::system(("gzip -kf " + f).c_str()), 0);
  FileQueue files({f + ".gz"});
  FeedStats stats;
  MultiSlotDataFeed feed(Desc(8, "zcat"), &files, &stats);
  std::vector<Tensor> b;
  auto more = feed.Next(&b);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(Values<int64_t>(b[0]), (std::vector<int64_t>{3, 4}));
  FileQueue bad({f});  // not gzip: zcat fails, and says so
  MultiSlotDataFeed failing(Desc(8, "zcat"), &bad, &stats);
  more = failing.Next(&b);
  ASSERT_FALSE(more.ok());
  EXPECT_NE(more.status().message().find("pipe_command 'zcat' failed on '" + f + "'"), std::string::npos)
      << more.status();
}

TEST(MultiSlotFeedTest, MalformedLinesNameFileLineAndSlot) {
  struct Case {
    const char* line;
    const char* says;
  } cases[] = {
      {"x 1 1 0 2 1 2 1 1", "slot 'words': count 'x' is not a number"},
      {"-1 1 1 0 2 1 2 1 1", "slot 'words': count '-1' is not a number"},
      {"0 1 0 2 1 2 1 1", "slot 'words': count 0"},
      {"1 abc 1 0 2 1 2 1 1", "slot 'words': value 'abc' is not a uint64 id"},
      {"1 5 zero 0 2 1 2 1 1", "slot 'skip': count 'zero'"},  // an unused slot's values are not read
      {"1 5 1 0 2 1 y 1 1", "slot 'dense': value 'y' is not a float"},
      {"1 5 1 0 3 1 2 3 1 1", "slot 'dense': a dense slot of width 2, but this line gives it 3"},
      {"1 5 1 0 2 1 2", "slot 'label': the line ends before this slot's count"},
      {"1 5 1 0 2 1 2 1", "slot 'label': the line ends after 0 of its 1 values"},
      {"1 5 1 0 2 1 2 2 1", "slot 'label': the line ends after 1 of its 2 values"},
      {"1 5 1 0 2 1 2 1 1 9", "values past the last slot ('9'"},
  };
  for (const Case& c : cases) {
    const std::string f = Write("bad", std::string("1 5 1 0 2 1 2 1 1\n") + c.line + "\n");
    FileQueue files({f});
    FeedStats stats;
    MultiSlotDataFeed feed(Desc(4), &files, &stats);
    std::vector<Tensor> b;
    auto more = feed.Next(&b);
    ASSERT_FALSE(more.ok()) << c.line;
    EXPECT_NE(more.status().message().find(f + ":2: " + c.says), std::string::npos) << more.status();
  }
}

TEST(MultiSlotFeedTest, SkippingBadLinesCountsThemAndKeepsTheGoodOnes) {
  const std::string f = Write("mixed", "1 5 1 0 2 1 2 1 1\n1 6 1 0 2 1 2 1\n1 7 1 0 2 1 2 1 0\n0 1 0 2 1 2 1 1\n");
  FileQueue files({f});
  FeedStats stats;
  MultiSlotDataFeed feed(Desc(10), &files, &stats, {.skip_bad_lines = true});
  std::vector<Tensor> b;
  auto more = feed.Next(&b);
  ASSERT_TRUE(more.ok() && *more) << more.status();
  EXPECT_EQ(Values<int64_t>(b[0]), (std::vector<int64_t>{5, 7}));  // nothing of the bad lines
  EXPECT_EQ(b[0].lod(), (LoD{{0, 1, 2}}));
  EXPECT_EQ(Values<int64_t>(b[2]), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(stats.bad_lines.load(), 2);
  EXPECT_NE(stats.first_bad_line().find(f + ":2: slot 'label'"), std::string::npos) << stats.first_bad_line();
}

TEST(MultiSlotFeedTest, ThreadsSharingTheFilesReadEveryInstanceOnce) {
  std::vector<std::string> paths;
  for (int k = 0; k < 7; ++k) {
    std::string text;
    for (int i = 0; i < 50 + k; ++i) absl::StrAppend(&text, "1 ", k * 1000 + i, " 1 0 2 0 0 1 1\n");
    paths.push_back(Write("part-" + std::to_string(k), text));
  }
  FileQueue files(paths);
  FeedStats stats;
  std::vector<std::vector<int64_t>> seen(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      MultiSlotDataFeed feed(Desc(16), &files, &stats);
      std::vector<Tensor> b;
      while (true) {
        auto more = feed.Next(&b);
        ASSERT_TRUE(more.ok()) << more.status();
        if (!*more) break;
        for (int64_t id : Values<int64_t>(b[0])) seen[t].push_back(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::multiset<int64_t> all;
  for (const auto& s : seen) all.insert(s.begin(), s.end());
  std::multiset<int64_t> want;
  for (int k = 0; k < 7; ++k) {
    for (int i = 0; i < 50 + k; ++i) want.insert(k * 1000 + i);
  }
  EXPECT_EQ(all, want);
  EXPECT_EQ(stats.files.load(), 7);
}

}  // namespace
}  // namespace oar
