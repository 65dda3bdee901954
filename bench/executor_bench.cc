// executor_bench: what the Executor costs on top of the arithmetic it runs.
//
// 1. One training step (forward, backward, SGD) of an MLP 784-512-256-10 at
//    batch 128 through Executor::Run with feed and fetch, against the same
//    eight GEMMs called straight through cblas_sgemm in the same run.
// 2. Per-op overhead: a program of 1000 chained `scale` ops on a 1-element
//    tensor, against the same 1000 multiply-adds in a plain loop.
//
// 3. What observing a run costs, on the MLP step and on the 1000-op chain:
//    the Profiler on (every op timed, as `oar train --profile` does) and the
//    step metrics (StepRecorder, which every `oar train`/`oar run` keeps),
//    each against the same executor with neither, in interleaved rounds.
//    With no Profiler given, an executor checks one pointer per op.
//
// Prints every figure, the baselines and the ratios. Medians of repeated
// timings; absolute times vary with the machine, the ratios are the point.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "bench/bench_util.h"
#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/base/blas_core.h"
#include "common/framework/executor.h"
#include "common/framework/run_env.h"
#include "common/metrics/training_metrics.h"
#include "common/profiler/profiler.h"
#include "glog/logging.h"

namespace oar {
namespace {

using Clock = std::chrono::steady_clock;

// Median seconds per call of `fn` over `repeats` timings of `iters` calls.
double MedianSeconds(const std::function<void()>& fn, int iters, int repeats) {
  for (int i = 0; i < iters; ++i) fn();  // warm up
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    for (int i = 0; i < iters; ++i) fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count() / iters);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<float> Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-0.1f, 0.1f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

void MlpStep() {
  constexpr int64_t kBatch = 128;
  const std::vector<int64_t> dims = {784, 512, 256, 10};

  UniqueNameGuard names;
  Program main, startup;
  main.set_random_seed(1);
  startup.set_random_seed(1);
  Var loss;
  {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {dims[0]});
    Var label = layers::data("label", {1}, DataType::kInt64);
    Var h = layers::fc(x, dims[1], "relu");
    h = layers::fc(h, dims[2], "relu");
    loss = layers::mean(layers::cross_entropy(layers::fc(h, dims[3], "softmax"), label));
    optimizer::SGD(0.01f).minimize(loss);
  }
  CHECK(main.status().ok()) << main.status();
  Executor exe;
  Scope scope;
  CHECK(exe.Run(startup.desc(), &scope).ok());
  Tensor xs = MakeTensor<float>({kBatch, dims[0]}, Random(kBatch * dims[0], 1));
  std::vector<int64_t> labels(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) labels[i] = i % 10;
  Tensor ys = MakeTensor<int64_t>({kBatch, 1}, labels);
  const FeedMap feed = {{"x", xs}, {"label", ys}};
  const std::vector<std::string> fetch = {loss.name()};
  auto step = [&] { CHECK(exe.Run(main.desc(), &scope, feed, fetch).ok()); };
  if (getenv("OAR_BENCH_PROFILE")) {
    for (int i = 0; i < 2000; ++i) step();
  }

  // The same GEMMs by hand: 3 forward, 3 weight gradients, 2 input gradients
  // (the data layer's gradient is not computed).
  std::vector<std::vector<float>> w, act, grad;
  act.push_back(Random(kBatch * dims[0], 2));
  for (size_t l = 0; l + 1 < dims.size(); ++l) {
    w.push_back(Random(dims[l] * dims[l + 1], 3 + l));
    act.push_back(std::vector<float>(kBatch * dims[l + 1]));
    grad.push_back(std::vector<float>(kBatch * dims[l + 1], 0.01f));
  }
  std::vector<std::vector<float>> dw = w;
  std::vector<std::vector<float>> dx = act;
  auto gemms = [&] {
    for (size_t l = 0; l + 1 < dims.size(); ++l) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kBatch, dims[l + 1], dims[l], 1.f, act[l].data(), dims[l],
                  w[l].data(), dims[l + 1], 0.f, act[l + 1].data(), dims[l + 1]);
    }
    for (size_t l = dims.size() - 1; l-- > 0;) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dims[l], dims[l + 1], kBatch, 1.f, act[l].data(), dims[l],
                  grad[l].data(), dims[l + 1], 0.f, dw[l].data(), dims[l + 1]);
      if (l > 0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kBatch, dims[l], dims[l + 1], 1.f, grad[l].data(),
                    dims[l + 1], w[l].data(), dims[l + 1], 0.f, dx[l].data(), dims[l]);
      }
    }
  };
  bench::Paired t = bench::TimePaired(step, gemms, 20, 9);
  std::printf(
      "mlp_step   784-512-256-10 batch %lld: executor %.3f ms, bare cblas_sgemm %.3f ms, "
      "ratio %.2fx (median of 9 interleaved rounds; target <= 1.30x)\n",
      static_cast<long long>(kBatch), t.a_seconds * 1e3, t.b_seconds * 1e3, t.ratio);

  // Observed: the same step with the step metrics, and with the profiler.
  metrics::StepRecorder recorder;
  auto step_metrics = [&] {
    recorder.Start();
    step();
    recorder.Done(kBatch);
  };
  Profiler profiler;
  RunEnv env;
  env.profiler = &profiler;
  Executor profiled(CPUPlace(), ExecutorOptions{.env = &env});
  auto step_profiled = [&] { CHECK(profiled.Run(main.desc(), &scope, feed, fetch).ok()); };
  bench::Paired m = bench::TimePaired(step_metrics, step, 20, 9);
  bench::Paired p = bench::TimePaired(step_profiled, step, 20, 9);
  std::printf(
      "observed   mlp_step with step metrics %.3f ms vs %.3f ms: %+.2f%% (target <= 3%%); "
      "with the profiler on %.3f ms vs %.3f ms: %+.2f%%\n",
      m.a_seconds * 1e3, m.b_seconds * 1e3, (m.ratio - 1) * 100, p.a_seconds * 1e3, p.b_seconds * 1e3,
      (p.ratio - 1) * 100);
}

void PerOpOverhead() {
  constexpr int kOps = 1000;
  ProgramDesc program;
  BlockDesc* b = program.MutableBlock(0);
  b->Var("v0")->shape = {1};
  for (int i = 0; i < kOps; ++i) {
    std::string in = "v" + std::to_string(i), out = "v" + std::to_string(i + 1);
    b->Var(out)->shape = {1};
    OpDesc* op = b->AppendOp();
    op->type = "scale";
    op->SetInput("X", {in});
    op->SetOutput("Out", {out});
    op->SetAttr("scale", 1.0001f);
    op->SetAttr("bias", 0.5f);
  }
  const std::string last = "v" + std::to_string(kOps);
  Executor exe;
  Scope scope;
  const FeedMap feed = {{"v0", MakeTensor<float>({1}, {1.0f})}};
  double run_s = MedianSeconds([&] { CHECK(exe.Run(program, &scope, feed, {last}).ok()); }, 50, 7);

  Executor drop(CPUPlace(), ExecutorOptions{.num_iteration_per_drop_scope = 1});
  double drop_s = MedianSeconds([&] { CHECK(drop.Run(program, &scope, feed, {last}).ok()); }, 50, 7);

  Profiler profiler;
  RunEnv env;
  env.profiler = &profiler;
  Executor profiled(CPUPlace(), ExecutorOptions{.env = &env});
  bench::Paired p = bench::TimePaired([&] { CHECK(profiled.Run(program, &scope, feed, {last}).ok()); },
                                      [&] { CHECK(exe.Run(program, &scope, feed, {last}).ok()); }, 50, 7);

  volatile float sink = 0;
  double raw_s = MedianSeconds(
      [&] {
        float v = 1.0f;
        for (int i = 0; i < kOps; ++i) v = v * 1.0001f + 0.5f;
        sink = v;
      },
      50, 7);
  std::printf(
      "per_op     %d scale ops on 1 element: %.3f us/op (%.3f us/op dropping the local scope every run); "
      "bare loop %.4f us/op; overhead %.3f us/op (target <= 2 us/op)\n",
      kOps, run_s * 1e6 / kOps, drop_s * 1e6 / kOps, raw_s * 1e6 / kOps, (run_s - raw_s) * 1e6 / kOps);
  std::printf("observed   per_op with the profiler on: %.3f us/op vs %.3f us/op off (%+.1f%%: one span per op)\n",
              p.a_seconds * 1e6 / kOps, p.b_seconds * 1e6 / kOps, (p.ratio - 1) * 100);
}

}  // namespace
}  // namespace oar

int main(int argc, char** argv) {
  oar::ReexecWithBestBlasCore(argv);  // before anything loads: see blas_core.h
  google::InitGoogleLogging(argv[0]);
  std::printf("executor_bench (OpenBLAS threads: %d, kernels: %s)\n", openblas_get_num_threads(),
              oar::BlasCoreName().c_str());
  oar::MlpStep();
  oar::PerOpOverhead();
  return 0;
}
