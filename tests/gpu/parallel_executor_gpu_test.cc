// The ParallelExecutor over every GPU of the host (up to 8), against as many
// CPU places on the same global batch (split the same way), from the same
// initial values: the small MLP's first 10 losses and its final
// weights agree, under AllReduce and under Reduce, with a sparse
// embedding, and with add+activation fused on the GPUs (with one GPU the
// executor runs without communication, and the test still checks the GPU
// place against the CPU). Gradients among GPUs are summed by NCCL
// (collective/nccl_places.h). Needs a GPU: each test skips itself, with the
// reason, without one. Labelled `gpu`.
//
// Tolerance: float32 on both sides, summed in another order on the GPU
// (see gpu_test_util.h): 1e-4 relative on the losses, 1e-4 absolute on
// weights of magnitude below 1, after 10 steps of Momentum.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/device/gpu_info.h"
#include "gtest/gtest.h"
#include "tests/gpu/require_gpu.h"
#include "tests/trainer/mlp_fixture.h"
#include "trainer/collective/nccl_collective.h"
#include "trainer/parallel_executor.h"
#include "trainer/places.h"

namespace oar {
namespace {

// Every GPU, up to the 8 examples of Mlp::Batch.
int Gpus() { return std::min(GpuCount(), 8); }

std::vector<Place> AllGpus() {
  std::vector<Place> p;
  for (int i = 0; i < Gpus(); ++i) p.push_back(CUDAPlace(i));
  return p;
}

// Several GPUs sum through NCCL, which a CUDA build may lack.
#define REQUIRE_GPUS_AND_NCCL()                                                                   \
  do {                                                                                            \
    REQUIRE_GPU();                                                                                \
    if (Gpus() > 1 && !NcclAvailable()) GTEST_SKIP() << "several GPUs and no NCCL in this build"; \
  } while (0)

struct Run {
  std::vector<float> losses;  // mean over places, steps 0..9
  std::vector<float> w;       // fc_0.w_0 on the last place after step 9
};

Run Train(const std::vector<Place>& places, BuildStrategy::ReduceStrategy strategy, bool sparse = false,
          bool fuse = false) {
  Run out;
  Mlp m(sparse);
  EXPECT_TRUE(m.main.status().ok()) << m.main.status();
  // The startup program on the CPU for both runs: the same initial values
  // (cuRAND would draw others); the executor moves them to the GPUs.
  Executor exe;
  Scope scope;
  EXPECT_TRUE(exe.Run(m.startup.desc(), &scope).ok());
  BuildStrategy build;
  build.reduce_strategy = strategy;
  build.fuse_elewise_add_act_ops = fuse;
  auto pe = ParallelExecutor::Create(places, m.loss.name(), m.main.desc(), &scope, build);
  EXPECT_TRUE(pe.ok()) << pe.status();
  if (!pe.ok()) return out;
  for (int step = 0; step < 10; ++step) {
    auto r = (*pe)->Run({m.loss.name()}, Mlp::Batch(step));
    EXPECT_TRUE(r.ok()) << "step " << step << ": " << r.status();
    if (!r.ok()) return out;
    float mean = 0;
    for (float v : TensorToVector<float>((*r)[0])) mean += v / static_cast<float>(places.size());
    out.losses.push_back(mean);
  }
  const Tensor& w = (*pe)->place_scope(places.size() - 1)->FindVar("fc_0.w_0")->Get<Tensor>();
  EXPECT_TRUE(w.place() == places.back()) << w.place().ToString();
  Tensor host;
  EXPECT_TRUE(w.CopyTo(CPUPlace(), &host).ok());
  out.w = TensorToVector<float>(host);
  return out;
}

void ExpectSame(const Run& want, const Run& got) {
  ASSERT_EQ(want.losses.size(), 10u);
  ASSERT_EQ(got.losses.size(), 10u);
  for (size_t s = 0; s < 10; ++s) EXPECT_NEAR(got.losses[s], want.losses[s], 1e-4 * std::abs(want.losses[s])) << s;
  ASSERT_EQ(want.w.size(), got.w.size());
  for (size_t i = 0; i < want.w.size(); ++i) EXPECT_NEAR(got.w[i], want.w[i], 1e-4) << i;
  EXPECT_LT(want.losses[9], want.losses[0]);  // it trains
}

TEST(ParallelExecutorGpuTest, EveryGpuMatchesAsManyCpuPlacesUnderAllReduce) {
  REQUIRE_GPUS_AND_NCCL();
  const auto kAll = BuildStrategy::ReduceStrategy::kAllReduce;
  ExpectSame(Train(CpuPlaces(Gpus()), kAll), Train(AllGpus(), kAll));
}

TEST(ParallelExecutorGpuTest, EveryGpuMatchesAsManyCpuPlacesUnderReduce) {
  REQUIRE_GPUS_AND_NCCL();
  ExpectSame(Train(CpuPlaces(Gpus()), BuildStrategy::ReduceStrategy::kAllReduce),
             Train(AllGpus(), BuildStrategy::ReduceStrategy::kReduce));
}

// A sparse embedding gradient (SelectedRows) is joined across the GPUs,
// not summed densely.
TEST(ParallelExecutorGpuTest, EveryGpuMatchesAsManyCpuPlacesWithASparseEmbedding) {
  REQUIRE_GPUS_AND_NCCL();
  const auto kAll = BuildStrategy::ReduceStrategy::kAllReduce;
  ExpectSame(Train(CpuPlaces(Gpus()), kAll, true), Train(AllGpus(), kAll, true));
}

// --fuse_elewise_add_act_ops on GPUs: the fused ops' kernels make the
// unfused CPU places' losses and weights.
TEST(ParallelExecutorGpuTest, FusedAddActivationOnEveryGpuMatchesUnfusedCpuPlaces) {
  REQUIRE_GPUS_AND_NCCL();
  const auto kAll = BuildStrategy::ReduceStrategy::kAllReduce;
  ExpectSame(Train(CpuPlaces(Gpus()), kAll), Train(AllGpus(), kAll, false, /*fuse=*/true));
}

}  // namespace
}  // namespace oar
