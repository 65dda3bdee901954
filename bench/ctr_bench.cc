// ctr_bench: sparse CTR training (issue 16). `ctr_bench [parse|prefetch|
// threads|memory]` (all of them, in that order, without an argument; the
// memory section in a child process of its own, so its peak RSS is the
// table's); `ctr_bench auc [examples]` (minutes: only when asked). The other
// sections: ctr_table_bench.cc, ctr_threads_bench.cc, ctr_auc_bench.cc.
//
// parse: writes a MultiSlot file shaped like Fluid's CTR example
// data (26 sparse id slots of 1-3 hashed ids, 13 dense floats, a label;
// ~64 MiB), then, in interleaved rounds, reads it with `cat > /dev/null`
// (the baseline: what it costs to move the bytes at all) and with one
// MultiSlotDataFeed thread, batch 512; prints both rates and the ratio
// (target >= 0.3x per thread).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/blas_core.h"
#include "common/data/multi_slot_feed.h"
#include "glog/logging.h"

namespace oar::bench {
namespace {

constexpr int kSparse = 26, kDense = 13;

DataFeedDesc CtrDesc() {
  std::string text = "batch_size: 512 multi_slot_desc {";
  absl::StrAppend(&text, " slots { name: 'dense' type: 'float' is_dense: true is_used: true shape: [-1, ", kDense,
                  "] }");
  for (int s = 0; s < kSparse; ++s)
    absl::StrAppend(&text, " slots { name: 'C", s + 1, "' type: 'uint64' is_used: true }");
  text += " slots { name: 'label' type: 'uint64' is_used: true } }";
  auto d = DataFeedDesc::Parse(text);
  CHECK(d.ok()) << d.status();
  return *d;
}

// Returns the file's size in bytes.
size_t WriteData(const std::string& path, size_t target_bytes) {
  std::mt19937_64 rng(7);
  std::ofstream out(path);
  std::string line;
  size_t bytes = 0;
  while (bytes < target_bytes) {
    line.clear();
    absl::StrAppend(&line, kDense);
    for (int k = 0; k < kDense; ++k) absl::StrAppend(&line, " ", static_cast<float>(rng() % 10000) / 1000.0f);
    for (int s = 0; s < kSparse; ++s) {
      const int n = 1 + static_cast<int>(rng() % 3);
      absl::StrAppend(&line, " ", n);
      for (int k = 0; k < n; ++k) absl::StrAppend(&line, " ", rng() % 1000000007ULL);
    }
    absl::StrAppend(&line, " 1 ", rng() % 2, "\n");
    out << line;
    bytes += line.size();
  }
  return bytes;
}

double Seconds(const std::chrono::steady_clock::time_point& start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int RunParseBench() {
  const std::string path = "/tmp/oar_ctr_bench_" + std::to_string(::getpid()) + ".txt";
  const size_t bytes = WriteData(path, 64 << 20);
  const DataFeedDesc desc = CtrDesc();
  std::vector<double> cat_s, feed_s;
  int64_t instances = 0;
  for (int round = 0; round < 5; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    CHECK_EQ(std::system(("cat " + path + " > /dev/null").c_str()), 0);
    cat_s.push_back(Seconds(t0));
    FileQueue files({path});
    FeedStats stats;
    MultiSlotDataFeed feed(desc, &files, &stats);
    std::vector<Tensor> batch;
    t0 = std::chrono::steady_clock::now();
    while (true) {
      auto more = feed.Next(&batch);
      CHECK(more.ok()) << more.status();
      if (!*more) break;
    }
    feed_s.push_back(Seconds(t0));
    instances = stats.instances.load();
  }
  std::remove(path.c_str());
  std::sort(cat_s.begin(), cat_s.end());
  std::sort(feed_s.begin(), feed_s.end());
  const double cat = cat_s[cat_s.size() / 2], parse = feed_s[feed_s.size() / 2];
  std::printf(
      "ctr_bench: MultiSlot parsing, %.0f MiB, %lld instances (26 sparse slots, 13 dense, label), median of 5\n",
      bytes / 1048576.0, static_cast<long long>(instances));
  std::printf(
      "  1 feed thread, batch 512: %.0f MB/s (%.0f instances/s); cat > /dev/null %.0f MB/s -> %.2fx "
      "(target >= 0.30x)\n",
      bytes / parse / 1e6, instances / parse, bytes / cat / 1e6, cat / parse);
  return 0;
}

}  // namespace

int RunPrefetchBench();
int RunThreadsBench();
int RunTableMemoryBench();
int RunAucBench(long examples);

int Main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  if (only == "auc") return RunAucBench(argc > 2 ? std::atol(argv[2]) : 1000000);
  if (!only.empty() && only != "parse" && only != "prefetch" && only != "threads" && only != "memory") {
    std::fprintf(stderr, "usage: ctr_bench [parse|prefetch|threads|memory] | ctr_bench auc [examples]\n");
    return 2;
  }
  if (only.empty() || only == "parse") RunParseBench();
  if (only.empty() || only == "prefetch") RunPrefetchBench();
  if (only.empty() || only == "threads") RunThreadsBench();
  if (only == "memory") return RunTableMemoryBench();
  if (only.empty()) {  // a fresh process: its peak RSS is the table's
    std::fflush(stdout);
    const std::string self = std::string(argv[0]) + " memory";
    return std::system(self.c_str()) == 0 ? 0 : 1;
  }
  return 0;
}

}  // namespace oar::bench

int main(int argc, char** argv) {
  oar::ReexecWithBestBlasCore(argv);  // before anything loads: see blas_core.h
  return oar::bench::Main(argc, argv);
}
