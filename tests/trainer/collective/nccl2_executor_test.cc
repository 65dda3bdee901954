// nccl2 mode in the ParallelExecutor: T trainers (threads here, each its own
// executor and scope) x P places, all-reducing across trainers through the
// TCP ring on loopback, against one process on T x P places fed the whole
// batch: each step's mean loss and the final parameters agree to 1e-6. With
// a sparse embedding (its rows all-gathered across trainers) and with
// gradients packed into buckets (fuse_all_reduce_ops).
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/trainer/mlp_fixture.h"
#include "tests/util/listen_socket.h"
#include "trainer/collective/shm_collective.h"
#include "trainer/collective/tcp_ring.h"
#include "trainer/parallel_executor.h"
#include "trainer/places.h"

namespace oar {
namespace {

constexpr int kSteps = 10;

struct Run {
  std::vector<float> losses;  // mean over the global batch, per step
  std::map<std::string, std::vector<float>> params;
  absl::Status status;
};

std::vector<std::string> Params(const ProgramDesc& p) {
  std::vector<std::string> out;
  for (const auto& [name, v] : p.Block(0).vars()) {
    if (v.persistable && name.find("learning_rate") == std::string::npos &&
        name.find("velocity") == std::string::npos && name != "feed" && name != "fetch") {
      out.push_back(name);
    }
  }
  return out;
}

// Rows [begin, end) of step s's batch.
FeedMap Rows(int step, int64_t begin, int64_t end) {
  FeedMap all = Mlp::Batch(step), out;
  for (auto& [name, t] : all) out[name] = t.Slice(begin, end);
  return out;
}

// The bucket size of the runs with fuse (BuildStrategy::fuse_parameter_memory_size).
double bucket_mb = 16;

Run Train(int trainers, int places, int rank, Collective* c, bool sparse, bool fuse) {
  Run r;
  Mlp m(sparse);
  Executor exe;
  Scope scope;
  r.status = exe.Run(m.startup.desc(), &scope).status();
  if (!r.status.ok()) return r;
  RunEnv env;
  BuildStrategy build;
  build.fuse_all_reduce_ops = fuse;
  build.fuse_parameter_memory_size = bucket_mb;
  auto pe = ParallelExecutor::Create(CpuPlaces(places), m.loss.name(), m.main.desc(), &scope, build, {}, trainers, rank,
                                     nullptr, &env, c);
  if (!pe.ok()) {
    r.status = pe.status();
    return r;
  }
  const int64_t per = 8 / trainers;
  for (int s = 0; s < kSteps; ++s) {
    auto out = (*pe)->Run({m.loss.name()}, Rows(s, rank * per, (rank + 1) * per));
    if (!out.ok()) {
      r.status = out.status();
      return r;
    }
    float mean = 0;
    for (float v : TensorToVector<float>((*out)[0])) mean += v / static_cast<float>((*out)[0].numel());
    r.losses.push_back(mean);
  }
  for (const auto& p : Params(m.main.desc())) {
    if (scope.FindVar(p) != nullptr && scope.FindVar(p)->IsType<Tensor>()) {
      r.params[p] = TensorToVector<float>(scope.FindVar(p)->Get<Tensor>());
    }
  }
  return r;
}

// `shm`: the trainers join over shared memory (small slots, so a gradient
// takes several rounds) instead of keeping the ring.
void Compare(int trainers, int places, bool sparse, bool fuse, bool shm = false) {
  const Run ref = Train(1, trainers * places, 0, nullptr, sparse, false);
  ASSERT_TRUE(ref.status.ok()) << ref.status;
  std::vector<std::string> eps;
  for (int t = 0; t < trainers; ++t) eps.push_back(ReservedEndpoint());
  std::vector<Run> runs(static_cast<size_t>(trainers));
  std::vector<std::thread> threads;
  for (int t = 0; t < trainers; ++t) {
    threads.emplace_back([&, t] {
      auto ring = TcpRing::Create({.rank = t, .endpoints = eps, .token = "nccl2-test", .timeout = absl::Seconds(30)});
      if (!ring.ok()) {
        runs[t].status = ring.status();
        return;
      }
      std::unique_ptr<Collective> c = *std::move(ring);
      if (shm) {
        auto joined = JoinOverSharedMemory(std::unique_ptr<TcpRing>(static_cast<TcpRing*>(c.release())), eps,
                                           {.transport = "shm", .slot_bytes = 4096, .timeout = absl::Seconds(30)});
        if (!joined.ok()) {
          runs[t].status = joined.status();
          return;
        }
        c = *std::move(joined);
      }
      runs[t] = Train(trainers, places, t, c.get(), sparse, fuse);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < trainers; ++t) ASSERT_TRUE(runs[t].status.ok()) << "trainer " << t << ": " << runs[t].status;
  for (int s = 0; s < kSteps; ++s) {
    float mean = 0;
    for (const Run& r : runs) mean += r.losses[s] / static_cast<float>(trainers);
    EXPECT_NEAR(mean, ref.losses[s], 1e-6) << "step " << s;
  }
  EXPECT_LT(ref.losses.back(), ref.losses.front());  // it trains: not a flat line
  ASSERT_FALSE(ref.params.empty());
  for (const auto& [name, want] : ref.params) {
    for (const Run& r : runs) {
      const auto& got = r.params.at(name);
      ASSERT_EQ(got.size(), want.size()) << name;
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << name << "[" << i << "]";
    }
  }
}

TEST(Nccl2ExecutorTest, TwoTrainersOnOnePlaceEqualOneProcessOnTwo) { Compare(2, 1, false, false); }
TEST(Nccl2ExecutorTest, TwoTrainersOnTwoPlacesEqualOneProcessOnFour) { Compare(2, 2, false, false); }
TEST(Nccl2ExecutorTest, SparseEmbeddingRowsAreGatheredAcrossTrainers) { Compare(2, 2, true, false); }
TEST(Nccl2ExecutorTest, BucketedGradientsGiveTheSameResult) {
  bucket_mb = 0.0003;  // ~300 bytes: several buckets of small gradients
  Compare(2, 1, false, true);
  bucket_mb = 16;
  Compare(4, 1, false, true);  // everything in one bucket
}

TEST(Nccl2ExecutorTest, OverSharedMemoryTheSameHolds) {
  Compare(2, 1, false, false, /*shm=*/true);
  Compare(2, 2, true, false, /*shm=*/true);  // sparse rows all-gathered
  Compare(4, 1, false, true, /*shm=*/true);  // buckets (the batch of 8 splits evenly over 4)
}

TEST(Nccl2ExecutorTest, WithoutACollectiveSeveralTrainersAreAnError) {
  Mlp m;
  Executor exe;
  Scope scope;
  ASSERT_TRUE(exe.Run(m.startup.desc(), &scope).ok());
  auto pe = ParallelExecutor::Create(CpuPlaces(1), m.loss.name(), m.main.desc(), &scope, {}, {}, 2, 0);
  EXPECT_EQ(pe.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(pe.status().message().find("no collective"), std::string::npos) << pe.status();
}

}  // namespace
}  // namespace oar
