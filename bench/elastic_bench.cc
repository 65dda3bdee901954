// elastic_bench: what elasticity costs a job that loses no trainer (issue
// 53's target: at most 3% of its examples/s). Each elastic job runs beside
// the same fixed job in the same run, in interleaved rounds (this host's
// speed drifts), and the median of the per-round ratios is printed:
//   nccl2:         oar launch --mode nccl2 --trainers 3   vs  --elastic --trainers 3:3
//   pserver sync:  oar launch --pservers 1 --trainers 3   vs  --elastic --trainers 3:3
//                  and with 2 pservers (where an elastic trainer waits for
//                  its sends' answers before its barrier)
//   pserver async: the same with --async
// fashion_mlp, 2 epochs of Fashion-MNIST, batch 96 (32 per trainer), one
// BLAS thread per process.
//
// Thread-safety: a single-threaded program.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_util.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "tests/util/oar_process.h"

DEFINE_int32(rounds, 3, "interleaved rounds of each pair of jobs (medians printed)");
DEFINE_string(modes, "nccl2,sync,sync2,async", "which of nccl2, sync, sync2 (2 pservers), async to time");

namespace oar::bench {
namespace {

struct Pair {
  std::string name, fixed, elastic;
};

int Main() {
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  const std::string model = " --model fashion_mlp --epochs 2 --batch_size 96 --seed 3 --rpc_deadline 20000";
  std::vector<Pair> pairs;
  const std::string modes = "," + FLAGS_modes + ",";
  if (modes.find(",nccl2,") != std::string::npos) {
    pairs.push_back(
        {"nccl2, 3 trainers", "launch --mode nccl2 --trainers 3", "launch --mode nccl2 --elastic --trainers 3:3"});
  }
  if (modes.find(",sync,") != std::string::npos) {
    pairs.push_back({"pserver sync, 1 pserver x 3 trainers", "launch --pservers 1 --trainers 3",
                     "launch --pservers 1 --elastic --trainers 3:3"});
  }
  if (modes.find(",sync2,") != std::string::npos) {  // its trainers wait for their sends' answers before a barrier
    pairs.push_back({"pserver sync, 2 pservers x 3 trainers", "launch --pservers 2 --trainers 3",
                     "launch --pservers 2 --elastic --trainers 3:3"});
  }
  if (modes.find(",async,") != std::string::npos) {
    pairs.push_back({"pserver async, 1 pserver x 3 trainers", "launch --async --pservers 1 --trainers 3",
                     "launch --async --pservers 1 --elastic --trainers 3:3"});
  }
  for (const Pair& p : pairs) {
    std::vector<double> fixed, elastic, ratio;
    for (int round = 0; round < FLAGS_rounds; ++round) {
      const Result f = Oar(p.fixed + model);
      CHECK_EQ(f.code, 0) << f.out;
      const Result e = Oar(p.elastic + model);
      CHECK_EQ(e.code, 0) << e.out;
      fixed.push_back(LaunchExamplesPerSecond(f.out));
      elastic.push_back(LaunchExamplesPerSecond(e.out));
      ratio.push_back(elastic.back() / fixed.back());
    }
    std::printf(
        "%s, fashion_mlp 2 epochs, medians of %d rounds: elastic %.0f examples/s, fixed job %.0f -> %.3fx "
        "(per-round ratios %s; target >= 0.970x)\n",
        p.name.c_str(), FLAGS_rounds, Median(elastic), Median(fixed), Median(ratio),
        [&] {
          std::string s;
          for (double r : ratio) absl::StrAppend(&s, s.empty() ? "" : " ", absl::StrFormat("%.3f", r));
          return s;
        }()
            .c_str());
  }
  return 0;
}

}  // namespace
}  // namespace oar::bench

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return oar::bench::Main();
}
