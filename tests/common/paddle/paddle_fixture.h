// The programs PaddlePaddle 2.6 wrote for the tests (tests/paddle_fixtures/
// make_fixtures.py; committed under tests/testdata/paddle/): loading one
// (programs, feeds, loss, Paddle's recorded losses) and training it from
// Paddle's own initial persistables on its fixed batches, on a place.
//
// Thread-safety: test-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/api/io.h"
#include "common/framework/executor.h"
#include "common/framework/tensor_io.h"
#include "gtest/gtest.h"
#include "tests/util/build_paths.h"

namespace oar::paddle_fixture {

// The fixtures' directory: $OAR_TESTDATA_DIR/paddle/ when set (a GPU
// machine that runs a copied build, scripts/gpu-run.sh), else the source
// tree's.
inline const std::string kDir = TestdataDir() + "/paddle/";

// Every training fixture (a directory with losses.txt), for the suites that
// train each of them.
inline const std::vector<std::string> kTrainingFixtures = {"mlp",
                                                           "cnn",
                                                           "embedding",
                                                           "zoo",
                                                           "probs",
                                                           "fluid16",
                                                           "adaptive",
                                                           "resnet18",
                                                           "bert",
                                                           "wide_deep",
                                                           "lstm",
                                                           "gru",
                                                           "word2vec_nce",
                                                           "word2vec_hsigmoid",
                                                           "fluid13_ctr_dnn",
                                                           "fluid13_word2vec",
                                                           "fluid15_ctr_dnn",
                                                           "fluid15_word2vec",
                                                           "fluid16_ctr_dnn",
                                                           "fluid16_word2vec",
                                                           "fluid18_ctr_dnn",
                                                           "fluid18_word2vec",
                                                           "axis"};

// Steps a fixture matches Paddle's losses to float rounding; after them the
// run may part from Paddle's by float noise (1e-2). resnet18: its ReLUs
// follow batch norms, and an output that Paddle rounds to +1.2e-7 Oar rounds
// to 0 (its batch mean is summed in double): the mask flips at step 9, that
// one gradient differs, and the runs part by float noise, not by a different
// formula (shown by dumping both runs' gradients: every one agrees within
// 4e-6 but at that element).
inline size_t ExactSteps(const std::string& model, size_t steps) { return model == "resnet18" ? 9 : steps; }

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Fixture {
  std::unique_ptr<ProgramDesc> main, startup;
  std::vector<std::string> feeds;
  std::string loss, params;
  int steps = 0, batches = 0;
  std::vector<double> losses;
  // What two sync trainers, each on half of every batch, record (the mean
  // of their losses), where that differs from `losses` (NCE draws each
  // trainer's negatives anew): losses_2trainers.txt, also Paddle's.
  std::vector<double> losses_2trainers;
};

inline Fixture Load(const std::string& model) {
  Fixture f;
  const std::string dir = kDir + model + "/";
  auto main = ProgramDesc::Parse(ReadFile(dir + "main.pb"));
  EXPECT_TRUE(main.ok()) << main.status();
  auto startup = ProgramDesc::Parse(ReadFile(dir + "startup.pb"));
  EXPECT_TRUE(startup.ok()) << startup.status();
  if (main.ok()) f.main = std::move(*main);
  if (startup.ok()) f.startup = std::move(*startup);
  for (absl::string_view line : absl::StrSplit(ReadFile(dir + "meta.txt"), '\n', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(line, ' ');
    if (kv[0] == "feeds") f.feeds = absl::StrSplit(kv[1], ',');
    if (kv[0] == "loss") f.loss = kv[1];
    if (kv[0] == "params") f.params = kv[1];
    if (kv[0] == "steps") {
      EXPECT_TRUE(absl::SimpleAtoi(kv[1], &f.steps));
    }
    if (kv[0] == "batches") {
      EXPECT_TRUE(absl::SimpleAtoi(kv[1], &f.batches));
    }
  }
  for (absl::string_view line : absl::StrSplit(ReadFile(dir + "losses.txt"), '\n', absl::SkipEmpty())) {
    double v = 0;
    EXPECT_TRUE(absl::SimpleAtod(line, &v)) << line;
    f.losses.push_back(v);
  }
  if (std::ifstream(dir + "losses_2trainers.txt").good()) {
    for (absl::string_view line : absl::StrSplit(ReadFile(dir + "losses_2trainers.txt"), '\n', absl::SkipEmpty())) {
      double v = 0;
      EXPECT_TRUE(absl::SimpleAtod(line, &v)) << line;
      f.losses_2trainers.push_back(v);
    }
  }
  return f;
}

// The fixture's fixed batches, by feed name.
inline std::vector<FeedMap> LoadBatches(const std::string& model, const Fixture& f) {
  const std::string dir = kDir + model + "/";
  std::vector<FeedMap> batches(f.batches);
  for (int b = 0; b < f.batches; ++b) {
    for (const std::string& feed : f.feeds) {
      const std::string path = dir + "batch_" + std::to_string(b) + "." + feed;
      std::ifstream in(path, std::ios::binary);
      Tensor t;
      const absl::Status s = ReadLoDTensor(in, path, &t);
      EXPECT_TRUE(s.ok()) << s;
      batches[b][feed] = std::move(t);
    }
  }
  return batches;
}

// Trainer `rank`'s share of `batch` among `parts`: rows [rank·n/parts,
// (rank+1)·n/parts) of every dense feed, the same share of the sequences of
// every LoD feed.
inline FeedMap Share(const FeedMap& batch, int rank, int parts) {
  FeedMap out;
  for (const auto& [name, t] : batch) {
    if (t.lod().empty()) {
      const int64_t n = t.dims()[0];
      out[name] = t.Slice(rank * n / parts, (rank + 1) * n / parts);
      continue;
    }
    // A LoD batch (level 1): this share's sequences, their offsets rebased.
    const std::vector<size_t>& off = t.lod()[0];
    const size_t seqs = off.size() - 1;
    const size_t first = static_cast<size_t>(rank) * seqs / parts, last = static_cast<size_t>(rank + 1) * seqs / parts;
    Tensor part = t.Slice(static_cast<int64_t>(off[first]), static_cast<int64_t>(off[last]));
    std::vector<size_t> level;
    for (size_t s = first; s <= last; ++s) level.push_back(off[s] - off[first]);
    part.set_lod({level});
    out[name] = part;
  }
  return out;
}

// Records (in the test's XML and on stdout) the largest relative
// difference between `got` and Paddle's `want`, for the closing figures.
inline double ReportMaxRelativeError(const std::vector<double>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::max(std::abs(want[i]), 1e-30));
  }
  std::ostringstream text;
  text << worst;
  ::testing::Test::RecordProperty("max_relative_loss_error", text.str());
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::printf("%s.%s %s: max relative loss error vs Paddle %.3g over %zu steps\n", test->test_suite_name(),
              test->name(), test->value_param() ? test->value_param() : "", worst, got.size());
  return worst;
}

inline bool HasBatchNorm(const ProgramDesc& p) {
  for (size_t i = 0; i < p.Block(0).OpSize(); ++i) {
    if (p.Block(0).Op(i).type == "batch_norm") return true;
  }
  return false;
}

// Trainers each trained on their share of every batch: the mean of their
// losses is the whole batch's (every fixture's loss is a mean), so it must
// equal Paddle's recorded loss within 1e-5 at each step. A model with batch
// norm (each trainer's own statistics) must only run: finite losses.
inline void ExpectMeanLossesMatch(const Fixture& f, const std::vector<std::vector<double>>& losses) {
  const std::vector<double>& want = losses.size() == 2 && !f.losses_2trainers.empty() ? f.losses_2trainers : f.losses;
  for (const auto& l : losses) ASSERT_EQ(l.size(), want.size());
  std::vector<double> mean(want.size(), 0.0);
  for (size_t i = 0; i < want.size(); ++i) {
    for (const auto& l : losses) mean[i] += l[i] / static_cast<double>(losses.size());
    if (HasBatchNorm(*f.main)) {
      EXPECT_TRUE(std::isfinite(mean[i])) << "step " << i;
    } else {
      EXPECT_NEAR(mean[i], want[i], 1e-5 * std::abs(want[i])) << "step " << i;
    }
  }
  if (!HasBatchNorm(*f.main)) ReportMaxRelativeError(mean, want);
}

// Trains the fixture on `place` (with `env`, when given) from Paddle's
// initial values; returns the losses.
inline std::vector<double> Train(const std::string& model, const Fixture& f, const Place& place = CPUPlace(),
                                 const RunEnv* env = nullptr) {
  const std::string dir = kDir + model + "/";
  Executor exe(place, {.env = env});
  Scope scope;
  auto st = exe.Run(*f.startup, &scope);
  EXPECT_TRUE(st.ok()) << st.status();
  const absl::Status loaded = f.params == "dir" ? load_persistables(exe, &scope, dir + "params", *f.main)
                                                : load_persistables(exe, &scope, dir, *f.main, "params");
  EXPECT_TRUE(loaded.ok()) << loaded;
  const std::vector<FeedMap> batches = LoadBatches(model, f);
  std::vector<double> losses;
  for (int step = 0; step < f.steps; ++step) {
    auto out = exe.Run(*f.main, &scope, batches[step % f.batches], {f.loss});
    EXPECT_TRUE(out.ok()) << "step " << step << ": " << out.status();
    if (!out.ok()) break;
    losses.push_back((*out)[0].data<float>()[0]);
  }
  return losses;
}

}  // namespace oar::paddle_fixture
