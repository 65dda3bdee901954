// fixture_train_bench: Oar's side of bench/paddle_fixture_bench.py. Trains
// one Paddle-written fixture (tests/testdata/paddle/<model>: main.pb,
// startup.pb, Paddle's saved values, batch_<i>.<feed>) from Paddle's
// values, on its batches each tiled --repeat times (every example, and
// every LoD sequence, repeated: a batch of repeat × the fixture's), for
// --steps steps after --warmup, with one BLAS thread; prints one line:
//
//   <model> examples/s <rate> steps <n> batch <examples> loss <first> <last>
//
// The script runs PaddlePaddle on the very same files and batches beside
// it and prints the ratio.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_split.h"
#include "common/api/io.h"
#include "common/base/blas.h"
#include "common/framework/executor.h"
#include "common/framework/tensor_io.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DEFINE_string(dir, "", "the fixture's directory (tests/testdata/paddle/<model>)");
DEFINE_int32(repeat, 8, "how many times each fixture batch is tiled");
DEFINE_int32(steps, 40, "timed steps");
DEFINE_int32(warmup, 3, "untimed steps first");

namespace oar {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `t` repeated `r` times along its first dimension (its LoD sequences too).
Tensor Tile(const Tensor& t, int r) {
  std::vector<int64_t> d = t.dims().ToVector();
  const int64_t rows = d[0];
  d[0] *= r;
  Tensor out;
  out.Resize(DDim(d));
  char* dst = static_cast<char*>(out.mutable_data(t.dtype(), CPUPlace()));
  for (int k = 0; k < r; ++k) std::memcpy(dst + k * t.nbytes(), t.raw_data(), t.nbytes());
  if (!t.lod().empty()) {
    const std::vector<size_t>& off = t.lod()[0];
    std::vector<size_t> level{0};
    for (int k = 0; k < r; ++k) {
      for (size_t s = 1; s < off.size(); ++s) level.push_back(off[s] + static_cast<size_t>(k * rows));
    }
    out.set_lod({level});
  }
  return out;
}

int Run() {
  const std::string dir = FLAGS_dir + "/";
  std::string loss;
  std::vector<std::string> feeds;
  int batches = 0;
  for (absl::string_view line : absl::StrSplit(ReadFile(dir + "meta.txt"), '\n', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(line, ' ');
    if (kv.size() < 2) continue;
    if (kv[0] == "feeds") feeds = absl::StrSplit(kv[1], ',');
    if (kv[0] == "loss") loss = kv[1];
    if (kv[0] == "batches") batches = std::stoi(kv[1]);
  }
  if (loss.empty() || feeds.empty() || batches == 0) {
    fprintf(stderr, "fixture_train_bench: %smeta.txt names no loss, feeds or batches\n", dir.c_str());
    return 2;
  }
  auto main = ProgramDesc::Parse(ReadFile(dir + "main.pb"));
  auto startup = ProgramDesc::Parse(ReadFile(dir + "startup.pb"));
  if (!main.ok() || !startup.ok()) {
    fprintf(stderr, "fixture_train_bench: %s\n",
            std::string((main.ok() ? startup.status() : main.status()).message()).c_str());
    return 1;
  }
  SetBlasThreads(1);
  Executor exe;
  Scope scope;
  absl::Status s = exe.Run(**startup, &scope).status();
  if (s.ok()) s = LoadPersistablesFrom(exe, &scope, dir + "params", **main);  // a directory or one file
  std::vector<FeedMap> feed(static_cast<size_t>(batches));
  int64_t examples = 0;
  for (int b = 0; b < batches && s.ok(); ++b) {
    for (const std::string& name : feeds) {
      const std::string path = dir + "batch_" + std::to_string(b) + "." + name;
      std::ifstream in(path, std::ios::binary);
      Tensor t;
      s = ReadLoDTensor(in, path, &t);
      if (!s.ok()) break;
      feed[static_cast<size_t>(b)][name] = Tile(t, FLAGS_repeat);
      if (b == 0 && examples == 0 && t.lod().empty()) examples = feed[0][name].dims()[0];  // a dense feed: 1 row each
    }
  }
  double first = 0, last = 0;
  std::chrono::steady_clock::time_point start;
  for (int step = 0; step < FLAGS_warmup + FLAGS_steps && s.ok(); ++step) {
    if (step == FLAGS_warmup) start = std::chrono::steady_clock::now();
    auto out = exe.Run(**main, &scope, feed[static_cast<size_t>(step % batches)], {loss});
    s = out.status();
    if (!s.ok()) break;
    last = static_cast<double>((*out)[0].data<float>()[0]);
    if (step == 0) first = last;
  }
  if (!s.ok()) {
    fprintf(stderr, "fixture_train_bench: %s: %s\n", FLAGS_dir.c_str(), std::string(s.message()).c_str());
    return 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string model = FLAGS_dir.substr(FLAGS_dir.find_last_of('/') + 1);
  printf("%s examples/s %.1f steps %d batch %lld loss %.6g %.6g\n", model.c_str(),
         static_cast<double>(examples) * FLAGS_steps / secs, FLAGS_steps, static_cast<long long>(examples), first,
         last);
  return 0;
}

}  // namespace
}  // namespace oar

int main(int argc, char** argv) {
  gflags::SetUsageMessage("fixture_train_bench --dir tests/testdata/paddle/<model> [--repeat N --steps N]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  if (FLAGS_dir.empty()) {
    fprintf(stderr, "fixture_train_bench: --dir is required (see --help)\n");
    return 2;
  }
  return oar::Run();
}
