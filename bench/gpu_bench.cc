// gpu_bench: issue 15's GPU targets, each beside its baseline from the same
// run. On a host without a GPU it says why and exits 0.
//
// 1. A training step of fashion_mlp and fashion_cnn (Adam, as `oar train`
//    builds them) at batch 128 and 512 through Executor(CUDAPlace(0)): feed
//    from host memory, forward, backward, update, fetch the loss. Baseline:
//    the cuBLAS/cuDNN calls of the same shapes issued bare, back to back
//    (gpu_library_calls.h). Target: step <= 1.3x the calls.
// 2. Host-to-device feed of pageable host memory (Tensor::CopyTo through
//    the pinned staging buffers), against cudaMemcpyAsync from pinned
//    memory of the same size. Target: >= 0.8x its bandwidth.
// 3. Per-op overhead: 1000 chained `scale` ops on a 1-element tensor
//    through the executor, against 1000 bare launches of the same kernel.
//
// Medians of alternating rounds (bench_util.h); the ratios are the point.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/gpu_library_calls.h"
#include "cli/model_build.h"
#include "cli/runtime_flags.h"
#include "common/device/cuda_context.h"
#include "common/device/device_memory.h"
#include "common/device/gpu_info.h"
#include "common/framework/executor.h"
#include "common/ops/cuda_launch.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DEFINE_int32(rounds, 7, "timing rounds per figure (the median is printed)");
DECLARE_bool(gpu_allow_tf32);

namespace oar {
namespace {

void ModelStep(const std::string& model, int64_t batch) {
  cli::BuildOptions o;
  o.model = model;
  o.batch_size = batch;
  auto built = cli::BuildModel(o);
  CHECK(built.ok()) << built.status();
  cli::ModelPrograms& p = **built;
  Executor exe(CUDAPlace(0));
  Scope scope;
  CHECK(exe.Run(p.startup.desc(), &scope).ok());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> pixel(0.f, 1.f);
  Tensor x, y;
  float* xp = x.mutable_data<float>(DDim{batch, 784});
  for (int64_t i = 0; i < batch * 784; ++i) xp[i] = pixel(rng);
  int64_t* yp = y.mutable_data<int64_t>(DDim{batch, 1});
  for (int64_t i = 0; i < batch; ++i) yp[i] = static_cast<int64_t>(rng() % 10);
  cli::ShapeLikeFeed(p.vars.feeds[0], &x);
  const FeedMap feed = {{p.vars.feeds[0].name(), x}, {p.vars.feeds[1].name(), y}};
  const std::vector<std::string> fetch = {p.vars.loss.name()};
  auto step = [&] {
    auto r = exe.Run(p.main.desc(), &scope, feed, fetch);
    CHECK(r.ok()) << r.status();
  };
  auto calls = bench::LibraryCalls::FromProgram(p.main.desc(), batch, 0);
  CHECK(calls.ok()) << calls.status();
  const int iters = batch >= 512 ? 20 : 50;
  bench::Paired t = bench::TimePaired(
      step, [&] { (*calls)->RunAll(); }, iters, FLAGS_rounds);
  std::printf(
      "%-11s batch %4lld: step %8.3f ms; its %zu cuBLAS/cuDNN calls alone (%s) %8.3f ms; ratio %.2f "
      "(target <= 1.3)\n",
      model.c_str(), static_cast<long long>(batch), t.a_seconds * 1e3, (*calls)->size(), (*calls)->Summary().c_str(),
      t.b_seconds * 1e3, t.ratio);
}

void Feed(size_t bytes) {
  CudaContext* c = *GetCudaContext(0);
  Tensor host;
  float* h = host.mutable_data<float>(DDim{static_cast<int64_t>(bytes / sizeof(float))});
  for (size_t i = 0; i < bytes / sizeof(float); ++i) h[i] = static_cast<float>(i % 251);
  Tensor dev;
  void* pinned = nullptr;
  void* dst = nullptr;
  CHECK_EQ(cudaMallocHost(&pinned, bytes), cudaSuccess);
  CHECK_EQ(cudaMalloc(&dst, bytes), cudaSuccess);
  auto ours = [&] {
    CHECK(host.CopyTo(CUDAPlace(0), &dev).ok());
    CHECK(SyncPlace(CUDAPlace(0)).ok());
  };
  auto bare = [&] {
    CHECK_EQ(cudaMemcpyAsync(dst, pinned, bytes, cudaMemcpyHostToDevice, c->stream), cudaSuccess);
    CHECK_EQ(cudaStreamSynchronize(c->stream), cudaSuccess);
  };
  const int iters = bytes >= (size_t{16} << 20) ? 10 : 200;
  bench::Paired t = bench::TimePaired(ours, bare, iters, FLAGS_rounds);
  std::printf(
      "feed %8.2f MiB from pageable memory: %6.2f GB/s; cudaMemcpyAsync from pinned %6.2f GB/s; "
      "ratio %.2f (target >= 0.8)\n",
      bytes / 1048576.0, bench::GBps(bytes, t.a_seconds), bench::GBps(bytes, t.b_seconds), 1.0 / t.ratio);
  cudaFreeHost(pinned);
  cudaFree(dst);
}

void LaunchOverhead() {
  constexpr int kOps = 1000;
  ProgramDesc program;
  BlockDesc* b = program.MutableBlock(0);
  for (int i = 0; i <= kOps; ++i) {
    VarDesc* v = b->Var("v" + std::to_string(i));
    v->shape = {1};
    v->persistable = i == 0;  // set below in the run's scope, not made afresh in its child scope
  }
  for (int i = 0; i < kOps; ++i) {
    OpDesc* op = b->AppendOp();
    op->type = "scale";
    op->SetInput("X", {"v" + std::to_string(i)});
    op->SetOutput("Out", {"v" + std::to_string(i + 1)});
    op->SetAttr("scale", 1.0001f);
  }
  Executor exe(CUDAPlace(0));
  Scope scope;
  Tensor v0;
  v0.mutable_data<float>(DDim{1})[0] = 1.f;
  Tensor* dev = scope.Var("v0")->GetMutable<Tensor>();
  CHECK(v0.CopyTo(CUDAPlace(0), dev).ok());
  CudaContext* c = *GetCudaContext(0);
  float* a = nullptr;
  CHECK_EQ(cudaMalloc(&a, 2 * sizeof(float)), cudaSuccess);
  auto ours = [&] { CHECK(exe.Run(program, &scope).ok()); };
  auto bare = [&] {
    for (int i = 0; i < kOps; ++i) cuda::Scale<float>(a + (i & 1), a + 1 - (i & 1), 1, 1.0001f, 0.f, true, c->stream);
    CHECK_EQ(cudaStreamSynchronize(c->stream), cudaSuccess);
  };
  bench::Paired t = bench::TimePaired(ours, bare, 20, FLAGS_rounds);
  std::printf("per op, %d chained 1-element scale ops: executor %.2f us; bare kernel launch %.2f us; ratio %.2f\n",
              kOps, t.a_seconds * 1e6 / kOps, t.b_seconds * 1e6 / kOps, t.ratio);
  cudaFree(a);
}

}  // namespace
}  // namespace oar

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  oar::cli::ApplyRuntimeFlags();  // --gpu_allow_tf32, as `oar` does
  if (oar::GpuCount() == 0) {
    std::printf("gpu_bench: no GPU: %s\n", oar::NoGpuReason().c_str());
    return 0;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("gpu_bench on %s (TF32 %s)\n", prop.name, FLAGS_gpu_allow_tf32 ? "allowed" : "off");
  oar::Feed(size_t{128} * 784 * 4);
  oar::Feed(size_t{512} * 784 * 4);
  oar::Feed(size_t{64} << 20);
  oar::LaunchOverhead();
  for (const char* model : {"fashion_mlp", "fashion_cnn"}) {
    for (int64_t batch : {128, 512}) oar::ModelStep(model, batch);
  }
  return 0;
}
