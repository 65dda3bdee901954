// AsyncExecutor over MultiSlot files: one thread equals the plain Executor
// fed the same batches (parameters and last loss); several threads consume
// every instance once and train; debug prints a line per batch; a bad slot,
// fetch target or line is an error naming it.
#include "trainer/async_executor.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/data/multi_slot_feed.h"
#include "common/framework/executor.h"
#include "gtest/gtest.h"
#include "tests/trainer/mlp_fixture.h"

namespace oar {
namespace {

DataFeedDesc MlpFeed(int batch) {
  auto d = DataFeedDesc::Parse(
      absl::StrCat("batch_size: ", batch,
                   " multi_slot_desc { slots { name: 'x' type: 'float' is_dense: true is_used: true shape: [-1, 6] }"
                   " slots { name: 'label' type: 'uint64' is_used: true } }"));
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

// `files` files of `lines` + k lines each: 6 features and a label in 0..3.
std::vector<std::string> WriteFiles(const std::string& tag, int files, int lines) {
  std::vector<std::string> paths;
  for (int k = 0; k < files; ++k) {
    std::string text;
    for (int i = 0; i < lines + k; ++i) {
      text += "6";
      for (int f = 0; f < 6; ++f) absl::StrAppend(&text, " ", std::sin(0.1f * (k * 97 + i) * (f + 1)));
      absl::StrAppend(&text, " 1 ", (k + i) % 4, "\n");
    }
    paths.push_back(::testing::TempDir() + "/async_executor_" + tag + "-" + std::to_string(k));
    std::ofstream(paths.back()) << text;
  }
  return paths;
}

std::vector<float> Values(const Scope& scope, const std::string& name) {
  const Tensor& t = scope.FindVar(name)->Get<Tensor>();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(AsyncExecutorTest, OneThreadEqualsThePlainExecutorOnTheSameBatches) {
  Mlp mlp;
  const auto files = WriteFiles("one", 3, 20);
  Scope async_root, plain;
  Executor exe;
  ASSERT_TRUE(exe.Run(mlp.startup.desc(), &async_root).ok());
  ASSERT_TRUE(exe.Run(mlp.startup.desc(), &plain).ok());
  AsyncExecutor async(&async_root);
  std::FILE* quiet = std::tmpfile();
  auto result = async.Run(mlp.main.desc(), MlpFeed(8), files, 1, {mlp.loss.name()}, {.out = quiet});
  std::fclose(quiet);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->instances, 20 + 21 + 22);
  // The reference: the same files, in the same order, batch by batch.
  FileQueue queue(files);
  FeedStats stats;
  MultiSlotDataFeed reader(MlpFeed(8), &queue, &stats);
  std::vector<Tensor> batch;
  float last = 0;
  int64_t batches = 0;
  while (*reader.Next(&batch)) {
    auto out = exe.Run(mlp.main.desc(), &plain, {{"x", batch[0]}, {"label", batch[1]}}, {mlp.loss.name()});
    ASSERT_TRUE(out.ok()) << out.status();
    last = (*out)[0].data<float>()[0];
    ++batches;
  }
  EXPECT_EQ(result->batches, batches);
  ASSERT_EQ(result->last.size(), 1u);
  EXPECT_NEAR(result->last[0].data<float>()[0], last, 1e-6);
  int compared = 0;
  for (const auto& [name, v] : mlp.main.desc().Block(0).vars()) {
    if (!v.persistable || plain.FindVar(name) == nullptr || !plain.FindVar(name)->IsType<Tensor>()) continue;
    const Tensor& t = plain.FindVar(name)->Get<Tensor>();
    if (!t.initialized() || t.dtype() != DataType::kFloat32) continue;
    const std::vector<float> a = Values(async_root, name), b = Values(plain, name);
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6) << name << "[" << i << "]";
    ++compared;
  }
  EXPECT_GE(compared, 4) << "weights, biases and their velocities";
}

TEST(AsyncExecutorTest, SeveralThreadsConsumeEveryInstanceOnceAndTrain) {
  Mlp mlp;
  const auto files = WriteFiles("many", 7, 40);
  Scope root;
  Executor exe;
  ASSERT_TRUE(exe.Run(mlp.startup.desc(), &root).ok());
  const std::vector<float> before = Values(root, "fc_0.w_0");
  AsyncExecutor async(&root);
  std::FILE* out = std::tmpfile();
  auto result = async.Run(mlp.main.desc(), MlpFeed(8), files, 3, {mlp.loss.name()}, {.debug = true, .out = out});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->threads, 3);
  EXPECT_EQ(result->instances, 7 * 40 + 21);
  EXPECT_NE(Values(root, "fc_0.w_0"), before);
  EXPECT_TRUE(std::isfinite(result->last[0].data<float>()[0]));
  // debug: a line per batch, then the last values.
  std::rewind(out);
  char line[512];
  int64_t batch_lines = 0;
  std::string final_line;
  while (std::fgets(line, sizeof line, out)) {
    if (std::string(line).rfind("batch ", 0) == 0) ++batch_lines;
    final_line = line;
  }
  std::fclose(out);
  EXPECT_EQ(batch_lines, result->batches);
  EXPECT_EQ(final_line.rfind(mlp.loss.name() + "=", 0), 0u) << final_line;
}

TEST(AsyncExecutorTest, BadSlotsFetchesAndLinesAreErrorsNamingThem) {
  Mlp mlp;
  Scope root;
  Executor exe;
  ASSERT_TRUE(exe.Run(mlp.startup.desc(), &root).ok());
  AsyncExecutor async(&root);
  const auto files = WriteFiles("bad", 1, 5);
  auto feed = DataFeedDesc::Parse("multi_slot_desc { slots { name: 'pixels' type: 'float' is_used: true } }");
  ASSERT_TRUE(feed.ok());
  auto r = async.Run(mlp.main.desc(), *feed, files, 1, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("slot 'pixels' is not a variable"), std::string::npos) << r.status();
  r = async.Run(mlp.main.desc(), MlpFeed(4), files, 1, {"nope"});
  EXPECT_NE(r.status().message().find("fetch target 'nope'"), std::string::npos) << r.status();
  std::ofstream(files[0], std::ios::app) << "6 1 2 3\n";
  r = async.Run(mlp.main.desc(), MlpFeed(4), files, 2, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("AsyncExecutor thread 0"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find(files[0] + ":6: slot 'x'"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace oar
