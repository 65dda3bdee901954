#include "trainer/parallel_executor.h"

#include <cmath>
#include <cstdlib>
#include <set>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/device/gpu_info.h"
#include "gtest/gtest.h"
#include "tests/trainer/mlp_fixture.h"
#include "trainer/collective/nccl_places.h"
#include "trainer/feed_split.h"
#include "trainer/places.h"

namespace oar {
namespace {

TEST(FeedSplitTest, SplitsAlongDim0WithRemainderOnTheLastPlace) {
  auto parts = SplitFeed({{"x", MakeTensor<float>({5, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})}}, 2);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ((*parts)[0]["x"].dims(), (DDim{2, 2}));
  EXPECT_EQ((*parts)[1]["x"].dims(), (DDim{3, 2}));
  EXPECT_EQ(TensorToVector<float>((*parts)[1]["x"]), (std::vector<float>{4, 5, 6, 7, 8, 9}));
}

TEST(FeedSplitTest, SplitsLoDTensorsBySequence) {
  Tensor t = MakeTensor<int64_t>({6, 1}, {1, 2, 3, 4, 5, 6});
  t.set_lod({{0, 1, 4, 6}});
  auto parts = SplitFeed({{"ids", t}}, 2);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ((*parts)[0]["ids"].dims(), (DDim{1, 1}));
  EXPECT_EQ((*parts)[1]["ids"].lod(), (LoD{{0, 3, 5}}));
  EXPECT_EQ(TensorToVector<int64_t>((*parts)[1]["ids"]), (std::vector<int64_t>{2, 3, 4, 5, 6}));
}

TEST(FeedSplitTest, TooFewSamplesAndWrongListLengthAreErrors) {
  auto few = SplitFeed({{"x", MakeTensor<float>({1, 2}, {1, 2})}}, 2);
  EXPECT_EQ(few.status().message(), "feed 'x' has 1 samples, fewer than the 2 places it must be split across");
  EXPECT_EQ(CheckFeedList({{}, {}, {}}, 2).message(), "a list feed needs one entry per place: got 3 for 2 places");
}

TEST(FeedSplitTest, MergesFetchesAlongDim0) {
  auto merged = MergeFetched({{MakeTensor<float>({1}, {1})}, {MakeTensor<float>({2}, {2, 3})}});
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(TensorToVector<float>((*merged)[0]), (std::vector<float>{1, 2, 3}));
}

// Regression: places' fetches were checked for dtype and rank only, so
// [2, 3] and [2, 5] made a [4, 3] result into which 2 x 5 values were copied.
TEST(FeedSplitTest, FetchesThatDisagreePastDim0AreAnErrorNotAnOverflow) {
  Tensor a = MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = MakeTensor<float>({2, 5}, std::vector<float>(10, 7.0f));
  auto merged = MergeFetched({{a}, {b}});
  ASSERT_FALSE(merged.ok());
  EXPECT_NE(merged.status().message().find("place 1 returned float32[2, 5], place 0 float32[2, 3]"), std::string::npos)
      << merged.status();
  EXPECT_FALSE(MergeFetched({{a}, {Tensor()}}).ok());  // a place that fetched nothing
}

TEST(PlacesTest, ReadsCpuNum) {
  setenv("CPU_NUM", "3", 1);
  EXPECT_EQ(CpuPlacesFromEnv()->size(), 3u);
  setenv("CPU_NUM", "zero", 1);
  EXPECT_NE(CpuPlacesFromEnv().status().message().find("CPU_NUM='zero'"), std::string::npos);
  unsetenv("CPU_NUM");
  EXPECT_EQ(CpuPlacesFromEnv()->size(), 1u);
}

// Mean of the fetched per-place losses for steps 0..9.
std::vector<float> Losses(size_t places, bool sparse = false, std::vector<float>* final_w = nullptr,
                          BuildStrategy::ReduceStrategy strategy = BuildStrategy::ReduceStrategy::kAllReduce) {
  Mlp m(sparse);
  EXPECT_TRUE(m.main.status().ok()) << m.main.status();
  Executor exe;
  Scope scope;
  EXPECT_TRUE(exe.Run(m.startup.desc(), &scope).ok());
  BuildStrategy build;
  build.reduce_strategy = strategy;
  auto pe = ParallelExecutor::Create(CpuPlaces(static_cast<int>(places)), m.loss.name(), m.main.desc(), &scope, build);
  EXPECT_TRUE(pe.ok()) << pe.status();
  std::vector<float> out;
  for (int step = 0; step < 10; ++step) {
    auto r = (*pe)->Run({m.loss.name()}, Mlp::Batch(step));
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return out;
    EXPECT_EQ((*r)[0].numel(), static_cast<int64_t>(places));
    float mean = 0;
    for (float v : TensorToVector<float>((*r)[0])) mean += v / places;
    out.push_back(mean);
  }
  if (final_w) *final_w = TensorToVector<float>((*pe)->place_scope(places - 1)->FindVar("fc_0.w_0")->Get<Tensor>());
  return out;
}

class ParallelExecutorTest : public ::testing::TestWithParam<size_t> {};

TEST_P(ParallelExecutorTest, NPlacesMatchOnePlaceOnTheSameGlobalBatch) {
  std::vector<float> w1, wn;
  std::vector<float> one = Losses(1, false, &w1);
  std::vector<float> many = Losses(GetParam(), false, &wn);
  ASSERT_EQ(one.size(), 10u);
  ASSERT_EQ(many.size(), 10u);
  EXPECT_NEAR(one[0], many[0], 1e-6);
  EXPECT_NEAR(one[9], many[9], 1e-6);
  EXPECT_LT(one[9], one[0]);  // it trains
  ASSERT_EQ(w1.size(), wn.size());
  for (size_t i = 0; i < w1.size(); ++i) EXPECT_NEAR(w1[i], wn[i], 1e-5) << i;
}

TEST_P(ParallelExecutorTest, SparseGradientsAreMergedAcrossPlaces) {
  std::vector<float> one = Losses(1, true), many = Losses(GetParam(), true);
  ASSERT_EQ(one.size(), many.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(one[i], many[i], 1e-5) << "step " << i;
}

TEST_P(ParallelExecutorTest, ReduceAgreesWithAllReduce) {
  std::vector<float> wa, wr;
  std::vector<float> a = Losses(GetParam(), false, &wa, BuildStrategy::ReduceStrategy::kAllReduce);
  std::vector<float> r = Losses(GetParam(), false, &wr, BuildStrategy::ReduceStrategy::kReduce);
  ASSERT_EQ(a.size(), r.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], r[i], 1e-5) << "step " << i;
  for (size_t i = 0; i < wa.size(); ++i) EXPECT_NEAR(wa[i], wr[i], 1e-5) << i;  // the last place's copy
  std::vector<float> rs = Losses(GetParam(), true, nullptr, BuildStrategy::ReduceStrategy::kReduce);
  std::vector<float> as = Losses(GetParam(), true, nullptr, BuildStrategy::ReduceStrategy::kAllReduce);
  for (size_t i = 0; i < as.size(); ++i) EXPECT_NEAR(as[i], rs[i], 1e-5) << "sparse step " << i;
}

// Parameters changed in the caller's scope outside Run (an elastic sync
// trainer's step without data pulls them there) reach every place only
// through SpreadFromPlace0; the next step then trains every place from them,
// as a one-place executor started from them would.
TEST_P(ParallelExecutorTest, SpreadFromPlace0CopiesTheScopesPersistablesToEveryPlace) {
  Mlp m;
  Executor exe;
  Scope scope, one_scope;
  ASSERT_TRUE(exe.Run(m.startup.desc(), &scope).ok());
  auto pe = ParallelExecutor::Create(CpuPlaces(static_cast<int>(GetParam())), m.loss.name(), m.main.desc(), &scope);
  ASSERT_TRUE(pe.ok()) << pe.status();
  ASSERT_TRUE((*pe)->Run({m.loss.name()}, Mlp::Batch(0)).ok());
  Tensor* w = scope.FindVar("fc_0.w_0")->GetMutable<Tensor>();
  for (int64_t i = 0; i < w->numel(); ++i) w->data<float>()[i] = 0.01f * static_cast<float>(i % 13);
  const std::vector<float> pulled = TensorToVector<float>(*w);
  auto last = [&] {
    return TensorToVector<float>((*pe)->place_scope(GetParam() - 1)->FindVar("fc_0.w_0")->Get<Tensor>());
  };
  EXPECT_NE(last(), pulled);  // not there yet
  ASSERT_TRUE((*pe)->SpreadFromPlace0().ok());
  EXPECT_EQ(last(), pulled);
  // One more step on every place, against one place from the same values.
  for (const auto& [name, v] : m.main.desc().Block(0).vars()) {
    const Variable* src = scope.FindVar(name);
    if (v.persistable && src != nullptr && src->IsType<Tensor>() && src->Get<Tensor>().initialized()) {
      one_scope.Var(name)->GetMutable<Tensor>()->CopyFrom(src->Get<Tensor>());
    }
  }
  auto alone = ParallelExecutor::Create(CpuPlaces(1), m.loss.name(), m.main.desc(), &one_scope);
  ASSERT_TRUE(alone.ok()) << alone.status();
  ASSERT_TRUE((*pe)->Run({m.loss.name()}, Mlp::Batch(1)).ok());
  ASSERT_TRUE((*alone)->Run({m.loss.name()}, Mlp::Batch(1)).ok());
  const std::vector<float> want = TensorToVector<float>(one_scope.FindVar("fc_0.w_0")->Get<Tensor>());
  const std::vector<float> got = last();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

INSTANTIATE_TEST_SUITE_P(Places, ParallelExecutorTest, ::testing::Values(2u, 4u));

TEST(ParallelExecutorErrorsTest, ClearErrors) {
  Mlp m;
  Executor exe;
  Scope scope;
  ASSERT_TRUE(exe.Run(m.startup.desc(), &scope).ok());
  auto pe = ParallelExecutor::Create(CpuPlaces(4), m.loss.name(), m.main.desc(), &scope);
  ASSERT_TRUE(pe.ok());
  FeedMap small = {{"x", MakeTensor<float>({2, 6}, std::vector<float>(12, 0))},
                   {"label", MakeTensor<int64_t>({2, 1}, {0, 1})}};
  EXPECT_NE((*pe)->Run({m.loss.name()}, small).status().message().find("fewer than the 4 places"), std::string::npos);
  FeedMap bad_label = Mlp::Batch(0);
  bad_label["label"] = MakeTensor<int64_t>({8, 1}, {0, 1, 2, 3, 0, 1, 2, 9});
  auto r = (*pe)->Run({m.loss.name()}, bad_label);
  EXPECT_NE(r.status().message().find("place 3"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("label 9"), std::string::npos) << r.status();
  EXPECT_TRUE((*pe)->Run({m.loss.name()}, Mlp::Batch(1)).ok());  // recovers on good input
  EXPECT_FALSE(ParallelExecutor::Create(CpuPlaces(2), "nope", m.main.desc(), &scope).ok());
}

// Places are all CPUs or all GPUs, each GPU once (NCCL puts one rank on a
// GPU); without a GPU, GPU places fail naming why. Checked before any
// persistable is copied or any communicator made.
TEST(ParallelExecutorErrorsTest, PlacesAreCpusOrDistinctGpus) {
  Mlp m;
  Executor exe;
  Scope scope;
  ASSERT_TRUE(exe.Run(m.startup.desc(), &scope).ok());
  auto mixed = ParallelExecutor::Create({CPUPlace(), CUDAPlace(0)}, m.loss.name(), m.main.desc(), &scope);
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mixed.status().message().find("places mix CPUPlace and CUDAPlace(0)"), std::string::npos) << mixed.status();
  auto twice =
      ParallelExecutor::Create({CUDAPlace(1), CUDAPlace(0), CUDAPlace(1)}, m.loss.name(), m.main.desc(), &scope);
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("CUDAPlace(1) is given twice"), std::string::npos) << twice.status();
  EXPECT_EQ(NcclPlaces::Create({0, 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclPlaces::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  if (GpuCount() > 0) GTEST_SKIP() << "this host has a GPU (the gpu tests train there)";
  auto none = ParallelExecutor::Create({CUDAPlace(0), CUDAPlace(1)}, m.loss.name(), m.main.desc(), &scope);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("no GPU is visible"), std::string::npos) << none.status();
  EXPECT_FALSE(NcclPlaces::Create({0, 1}).ok());
}

}  // namespace
}  // namespace oar

namespace oar {
namespace {

TEST(SsaGraphTest, AllReducesEachGradientAfterItsLastWriterOnEveryPlace) {
  Mlp m;
  SsaGraph g = BuildSsaGraph(m.main.desc().Block(0), 2, GradientMode::kAllReduce);
  EXPECT_EQ(g.gradients.size(), 4u);  // two weights, two biases
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const OpHandle& h = g.ops[i];
    if (h.kind != OpHandle::Kind::kAllReduce) continue;
    std::set<size_t> places;
    for (size_t d : h.deps)
      if (g.ops[d].kind == OpHandle::Kind::kCompute) places.insert(g.ops[d].place);
    EXPECT_EQ(places, (std::set<size_t>{0, 1})) << h.label;
    for (size_t d : h.dependents) {  // the optimizer ops wait for it
      if (g.ops[d].kind == OpHandle::Kind::kCompute)
        EXPECT_EQ(m.main.desc().Block(0).Op(g.ops[d].op_index).role() & 2, 2);
    }
  }
  // Compute handles of different places never depend on each other.
  for (const OpHandle& h : g.ops) {
    if (h.kind != OpHandle::Kind::kCompute) continue;
    for (size_t d : h.deps) {
      if (g.ops[d].kind == OpHandle::Kind::kCompute) EXPECT_EQ(g.ops[d].place, h.place) << h.label;
    }
  }
  std::string dot = ToGraphviz(g);
  EXPECT_EQ(dot.rfind("digraph ssa_graph {", 0), 0u);
  EXPECT_NE(dot.find("all_reduce(fc_0.w_0@GRAD)"), std::string::npos);
}

}  // namespace
}  // namespace oar
