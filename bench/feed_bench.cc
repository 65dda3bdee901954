// feed_bench (issue 21, "not a bottleneck"): the data layer's feed rate
// beside the training rate it has to stay ahead of, one thread each, in one
// run, on data in the page cache:
//  - MultiSlot: ctr_dnn's files (4 x 10 000 lines, as `oar gen-ctr-data`
//    writes them) read into batches of 64 by MultiSlotSource (a queue
//    dataset: parsing included), against ctr_dnn (Adagrad, local table)
//    training on those very batches, read beforehand;
//  - npy: Fashion-MNIST-shaped arrays (60 000 x 784 float32, int64 labels)
//    saved with WriteNpy, loaded by LoadNpyArrays, batched by ArraySource
//    (global shuffle, batch 128: a gather of rows), against fashion_mlp
//    (SGD) training on those batches.
// Each line prints both rates (median of 3) and feed / train (target: >= 5x
// per thread; PrefetchSource then hides the feed behind the step).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "bench/ctr_files.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/data/array_source.h"
#include "common/data/multi_slot_source.h"
#include "common/data/npy.h"
#include "common/framework/executor.h"
#include "examples/model_zoo.h"
#include "glog/logging.h"

namespace oar::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

struct Model {
  Program main, startup;
  std::vector<const VarDesc*> feeds;
  std::string loss;
};

void Build(const std::string& name, bool adagrad, Model* m) {
  UniqueNameGuard names;
  ProgramGuard g(&m->main, &m->startup);
  BuiltModel b = FindModel(name)->build();
  if (adagrad) {
    optimizer::Adagrad(0.01f).minimize(b.loss);
  } else {
    optimizer::SGD(0.01f).minimize(b.loss);
  }
  CHECK(m->main.status().ok()) << m->main.status();
  for (const Var& v : b.feeds) m->feeds.push_back(m->main.desc().Block(0).FindVar(v.name()));
  m->loss = b.loss.name();
}

// Every batch of one epoch of `s`, and the examples/s it gave them at.
std::vector<FeedBatch> ReadAll(FeedSource* s, double* rate) {
  std::vector<FeedBatch> out;
  int64_t n = 0;
  const auto start = Clock::now();
  CHECK(s->StartEpoch(0).ok());
  for (FeedBatch b;;) {
    auto more = s->Next(&b);
    CHECK(more.ok()) << more.status();
    if (!*more) break;
    n += b.examples;
    out.push_back(std::move(b));
  }
  *rate = static_cast<double>(n) / Seconds(start);
  return out;
}

// examples/s training `m` on `batches` (the first few warm it up).
double TrainRate(Model& m, const std::vector<FeedBatch>& batches, size_t steps) {
  Scope scope;
  Executor exe;
  CHECK(exe.Run(m.startup.desc(), &scope).ok());
  for (size_t i = 0; i < 3; ++i) CHECK(exe.Run(m.main.desc(), &scope, batches[i].feeds, {m.loss}).ok());
  int64_t n = 0;
  const auto start = Clock::now();
  for (size_t i = 0; i < steps; ++i) {
    const FeedBatch& b = batches[i % batches.size()];
    auto r = exe.Run(m.main.desc(), &scope, b.feeds, {m.loss});
    CHECK(r.ok()) << r.status();
    n += b.examples;
  }
  return static_cast<double>(n) / Seconds(start);
}

void Report(const char* what, const std::vector<double>& feed, const std::vector<double>& train) {
  std::vector<double> ratio;
  for (size_t i = 0; i < feed.size(); ++i) ratio.push_back(feed[i] / train[i]);
  std::printf("  %-44s feed %10.0f examples/s, train %9.0f examples/s -> feed %.1fx train (target >= 5x)\n", what,
              Median(feed), Median(train), Median(ratio));
}

}  // namespace

int Run() {
  const std::string dir = absl::StrCat("/tmp/oar_feed_bench_", ::getpid());
  std::filesystem::create_directories(dir);
  std::vector<std::string> files;
  for (int f = 0; f < 4; ++f) {
    files.push_back(absl::StrCat(dir, "/part-", f));
    WriteCtrFile(files.back(), 10000, 21 + f);
  }
  Model ctr, mlp;
  Build("ctr_dnn", /*adagrad=*/true, &ctr);
  Build("fashion_mlp", /*adagrad=*/false, &mlp);
  // Fashion-MNIST's shape, random values (the feed does not look at them).
  Tensor images, labels;
  std::mt19937 rng(5);
  float* ip = images.mutable_data<float>(DDim{60000, 784});
  for (int64_t i = 0; i < images.numel(); ++i) ip[i] = static_cast<float>(rng() % 256) / 255.0f;
  int64_t* lp = labels.mutable_data<int64_t>(DDim{60000, 1});
  for (int64_t i = 0; i < labels.numel(); ++i) lp[i] = static_cast<int64_t>(rng() % 10);
  CHECK(WriteNpy(dir + "/" + mlp.feeds[0]->name + ".npy", images).ok());
  CHECK(WriteNpy(dir + "/" + mlp.feeds[1]->name + ".npy", labels).ok());

  std::vector<double> ms_feed, ms_train, npy_feed, npy_train;
  for (int round = 0; round < 3; ++round) {
    auto ms = MultiSlotSource::Make(CtrDesc(64), ctr.feeds, {.files = files});
    CHECK(ms.ok()) << ms.status();
    double rate = 0;
    std::vector<FeedBatch> batches = ReadAll(ms->get(), &rate);
    ms_feed.push_back(rate);
    ms_train.push_back(TrainRate(ctr, batches, 200));
    auto arrays = LoadNpyArrays("npy:" + dir, mlp.feeds);
    CHECK(arrays.ok()) << arrays.status();
    auto src =
        ArraySource::Make("npy", std::move(*arrays), {.batch_size = 128, .shuffle = ArrayShuffle::kGlobal, .seed = 1});
    CHECK(src.ok()) << src.status();
    batches = ReadAll(src->get(), &rate);
    npy_feed.push_back(rate);
    npy_train.push_back(TrainRate(mlp, batches, 200));
  }
  std::filesystem::remove_all(dir);
  std::printf("feed_bench: the data layer's feed vs the training it feeds, one thread each, median of 3\n");
  Report("MultiSlot (ctr_dnn files, batch 64, parsing)", ms_feed, ms_train);
  Report("npy (60000 x 784 float32, batch 128, shuffled)", npy_feed, npy_train);
  return 0;
}

}  // namespace oar::bench

int main() { return oar::bench::Run(); }
