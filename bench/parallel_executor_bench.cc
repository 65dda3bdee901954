// parallel_executor_bench: examples/s of fashion_mlp's network (784-256-128-10,
// Adam) training at batch 256 through the ParallelExecutor on 2 places,
// against 1 place in the same run — with OpenBLAS on 1 thread (what each
// place gets) and on every core. Then the scheduler's cost per op handle on
// a program of 1000 tiny ops. Interleaved rounds, median ratios.
#include <cblas.h>

#include <cstdio>
#include <random>
#include <thread>

#include "bench/bench_util.h"
#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/base/blas.h"
#include "common/base/blas_core.h"
#include "glog/logging.h"
#include "trainer/parallel_executor.h"
#include "trainer/places.h"

namespace oar {
namespace {

constexpr int64_t kBatch = 256;

struct Trainer {
  UniqueNameGuard names;
  Program main, startup;
  Var loss;
  Executor exe;
  Scope scope;
  std::unique_ptr<ParallelExecutor> pe;
  Trainer(int places, BuildStrategy::ReduceStrategy strategy = BuildStrategy::ReduceStrategy::kAllReduce,
          bool fuse = false) {
    main.set_random_seed(1);
    startup.set_random_seed(1);
    {
      ProgramGuard g(&main, &startup);
      Var x = layers::data("x", {784});
      Var label = layers::data("label", {1}, DataType::kInt64);
      Var h = layers::fc(layers::fc(x, 256, "relu"), 128, "relu");
      loss = layers::mean(layers::cross_entropy(layers::fc(h, 10, "softmax"), label));
      optimizer::Adam(0.001f).minimize(loss);
    }
    CHECK(main.status().ok());
    CHECK(exe.Run(startup.desc(), &scope).ok());
    BuildStrategy build;
    build.reduce_strategy = strategy;
    build.fuse_elewise_add_act_ops = fuse;
    auto created = ParallelExecutor::Create(CpuPlaces(places), loss.name(), main.desc(), &scope, build);
    CHECK(created.ok()) << created.status();
    pe = *std::move(created);
  }
};

FeedMap Batch(int64_t kBatch = kBatch) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> xs(kBatch * 784);
  for (auto& v : xs) v = u(rng);
  std::vector<int64_t> ys(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) ys[i] = i % 10;
  return {{"x", MakeTensor<float>({kBatch, 784}, xs)}, {"label", MakeTensor<int64_t>({kBatch, 1}, ys)}};
}

void Throughput() {
  const FeedMap feed = Batch();
  Trainer all_reduce(2);  // several places: OpenBLAS runs 1 thread
  Trainer reduce(2, BuildStrategy::ReduceStrategy::kReduce);
  Trainer fused(2, BuildStrategy::ReduceStrategy::kAllReduce, /*fuse=*/true);
  Trainer one(1);
  SetBlasThreads(1);
  auto step = [&](Trainer& t) { return [&t, &feed] { CHECK(t.pe->Run({t.loss.name()}, feed).ok()); }; };
  for (auto [name, t] : {std::pair<const char*, Trainer*>{"AllReduce", &all_reduce},
                         {"Reduce", &reduce},
                         {"AllReduce, fused add+act", &fused}}) {
    bench::Paired p = bench::TimePaired(step(*t), step(one), 20, 15);
    std::printf(
        "pe_throughput fashion_mlp batch %lld: 2 places (%s) %.0f ex/s, 1 place (1 BLAS thread) %.0f ex/s, "
        "speed-up %.2fx (target >= 1.60x)\n",
        static_cast<long long>(kBatch), name, kBatch / p.a_seconds, kBatch / p.b_seconds, 1.0 / p.ratio);
  }
  // The ceiling on this host: two independent 1-place trainers, each on half
  // the batch, on two threads at once, with no communication at all.
  const FeedMap half = Batch(kBatch / 2);
  Trainer solo_a(1), solo_b(1);
  auto pair_step = [&] {
    std::thread other([&] { CHECK(solo_b.pe->Run({solo_b.loss.name()}, half).ok()); });
    CHECK(solo_a.pe->Run({solo_a.loss.name()}, half).ok());
    other.join();
  };
  bench::Paired c = bench::TimePaired(pair_step, step(one), 20, 15);
  std::printf("pe_ceiling two independent half-batch trainers on 2 threads: speed-up %.2fx over 1 place\n",
              1.0 / c.ratio);
}

void SchedulerOverhead() {
  constexpr int kOps = 1000;
  ProgramDesc program;
  BlockDesc* b = program.MutableBlock(0);
  b->Var("v0")->shape = {-1};
  for (int i = 0; i < kOps; ++i) {
    const std::string out = "v" + std::to_string(i + 1);
    b->Var(out)->shape = {-1};
    OpDesc* op = b->AppendOp();
    op->type = "scale";
    op->SetInput("X", {"v" + std::to_string(i)});
    op->SetOutput("Out", {out});
  }
  Scope scope;
  auto pe = ParallelExecutor::Create(CpuPlaces(2), "", program, &scope);
  CHECK(pe.ok()) << pe.status();
  Executor exe;
  Scope scope1;
  const FeedMap feed = {{"v0", MakeTensor<float>({2}, {1, 2})}};
  const std::string last = "v" + std::to_string(kOps);
  bench::Paired t = bench::TimePaired([&] { CHECK((*pe)->Run({last}, feed).ok()); },
                                      [&] { CHECK(exe.Run(program, &scope1, feed, {last}).ok()); }, 20, 7);
  // 2 places × 1000 ops + 2 feed and 2 fetch handles.
  std::printf("pe_scheduler %d tiny ops on 2 places: %.2f us per op handle (plain Executor, 1 place: %.2f us per op)\n",
              kOps, t.a_seconds * 1e6 / (2 * kOps + 4), t.b_seconds * 1e6 / (kOps + 2));
}

}  // namespace
}  // namespace oar

int main(int argc, char** argv) {
  oar::ReexecWithBestBlasCore(argv);  // before anything loads: see blas_core.h
  google::InitGoogleLogging(argv[0]);
  oar::Throughput();
  oar::SchedulerOverhead();
  return 0;
}
