// conv_bench: conv2d forward + backward at fashion_cnn's shapes (batch 128:
// 1→20 channels 5×5 on 28×28, and 20→50 channels 5×5 on 12×12) through the
// Executor, against the same im2col / col2im + cblas_sgemm calls made
// directly in the same run. Prints both times and the ratio.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "bench/bench_util.h"
#include "common/base/blas_core.h"
#include "common/framework/executor.h"
#include "common/ops/im2col.h"
#include "glog/logging.h"

namespace oar {
namespace {

Tensor Random(const DDim& d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Tensor t;
  float* p = t.mutable_data<float>(d);
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = u(rng);
  return t;
}

struct Layer {
  DDim in, filter, out;
  bool input_grad;  // the first layer reads data: no input gradient
};

void AddConv(BlockDesc* b, int i, const Layer& l) {
  const std::string s = std::to_string(i);
  for (const auto& [name, dims] : std::vector<std::pair<std::string, DDim>>{{"x" + s, l.in},
                                                                            {"w" + s, l.filter},
                                                                            {"y" + s, l.out},
                                                                            {"dy" + s, l.out},
                                                                            {"dw" + s, l.filter},
                                                                            {"dx" + s, l.in}}) {
    b->Var(name)->shape = dims.ToVector();
  }
  OpDesc* f = b->AppendOp();
  f->type = "conv2d";
  f->SetInput("Input", {"x" + s});
  f->SetInput("Filter", {"w" + s});
  f->SetOutput("Output", {"y" + s});
  OpDesc* g = b->AppendOp();
  g->type = "conv2d_grad";
  g->SetInput("Input", {"x" + s});
  g->SetInput("Filter", {"w" + s});
  g->SetInput("Output@GRAD", {"dy" + s});
  g->SetOutput("Filter@GRAD", {"dw" + s});
  if (l.input_grad) g->SetOutput("Input@GRAD", {"dx" + s});
}

void Run() {
  constexpr int64_t kBatch = 128;
  const std::vector<Layer> layers = {{{kBatch, 1, 28, 28}, {20, 1, 5, 5}, {kBatch, 20, 24, 24}, false},
                                     {{kBatch, 20, 12, 12}, {50, 20, 5, 5}, {kBatch, 50, 8, 8}, true}};
  ProgramDesc program;
  FeedMap feed;
  for (size_t i = 0; i < layers.size(); ++i) {
    AddConv(program.MutableBlock(0), static_cast<int>(i), layers[i]);
    const std::string s = std::to_string(i);
    feed["x" + s] = Random(layers[i].in, 1 + i);
    feed["w" + s] = Random(layers[i].filter, 3 + i);
    feed["dy" + s] = Random(layers[i].out, 5 + i);
  }
  Executor exe;
  Scope scope;
  const std::vector<std::string> fetch = {"dw1"};
  auto first = exe.Run(program, &scope, feed, fetch);
  CHECK(first.ok()) << first.status();
  auto executor = [&] { CHECK(exe.Run(program, &scope, feed, fetch).ok()); };

  // The same arithmetic by hand.
  std::vector<std::vector<float>> y(2), dw(2), dx(2), col(2);
  for (size_t i = 0; i < 2; ++i) {
    y[i].resize(layers[i].out.numel());
    dw[i].resize(layers[i].filter.numel());
    dx[i].resize(layers[i].in.numel());
  }
  auto direct = [&] {
    for (size_t i = 0; i < layers.size(); ++i) {
      const Layer& l = layers[i];
      const std::string s = std::to_string(i);
      ConvGeometry g{l.in[1], l.in[2], l.in[3], l.filter[2], l.filter[3], 1, 1, 0, 0, 1, 1, l.out[2], l.out[3]};
      const int64_t m = l.filter[0], k = l.in[1] * l.filter[2] * l.filter[3], plane = l.out[2] * l.out[3];
      col[i].resize(k * plane);
      const float* x = feed["x" + s].data<float>();
      const float* w = feed["w" + s].data<float>();
      const float* gy = feed["dy" + s].data<float>();
      std::fill(dw[i].begin(), dw[i].end(), 0.f);
      if (l.input_grad) std::fill(dx[i].begin(), dx[i].end(), 0.f);
      const int64_t in_img = l.in.Product(1, 4);
      for (int64_t n = 0; n < kBatch; ++n) {
        Im2Col(x + n * in_img, g, col[i].data());
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, plane, k, 1.f, w, k, col[i].data(), plane, 0.f,
                    y[i].data() + n * m * plane, plane);
      }
      for (int64_t n = 0; n < kBatch; ++n) {
        Im2Col(x + n * in_img, g, col[i].data());
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, k, plane, 1.f, gy + n * m * plane, plane, col[i].data(),
                    plane, 1.f, dw[i].data(), k);
        if (l.input_grad) {
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, plane, m, 1.f, w, k, gy + n * m * plane, plane, 0.f,
                      col[i].data(), plane);
          Col2Im(col[i].data(), g, dx[i].data() + n * in_img);
        }
      }
    }
  };
  bench::Paired t = bench::TimePaired(executor, direct, 3, 7);
  std::printf(
      "conv_bench fashion_cnn conv layers, batch %lld, forward+backward: executor %.2f ms, "
      "im2col+cblas_sgemm %.2f ms, ratio %.2fx (median of 7 interleaved rounds; target <= 1.50x)\n",
      static_cast<long long>(kBatch), t.a_seconds * 1e3, t.b_seconds * 1e3, t.ratio);
}

}  // namespace
}  // namespace oar

int main(int argc, char** argv) {
  oar::ReexecWithBestBlasCore(argv);  // before anything loads: see blas_core.h
  google::InitGoogleLogging(argv[0]);
  oar::Run();
  return 0;
}
