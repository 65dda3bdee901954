// ctr_bench auc: the AUC target of issue 16. Writes 1M training examples
// with `oar gen-ctr-data` (its planted model's test AUC is the baseline:
// the best any model can do on this data), trains ctr_dnn on them for one
// epoch with `oar async-train` (single process, 2 threads) and with
// `oar launch` (2 pservers x 2 async trainers, the table distributed), and
// prints each test AUC beside the planted one (target: within 0.02).
// Runs only when asked (`ctr_bench auc [examples]`): about 6 minutes on 2
// cores at 1M examples.
#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/util/oar_process.h"

namespace oar::bench {
namespace {

std::string Tail(const std::string& out) { return out.size() > 2000 ? out.substr(out.size() - 2000) : out; }

}  // namespace

int RunAucBench(long examples) {
  const std::string dir = TempDir("ctr_auc_bench");
  Result gen = Oar(absl::StrCat("gen-ctr-data --out ", dir, " --examples ", examples, " --files 10 --seed 1"));
  if (gen.code != 0) {
    std::fprintf(stderr, "gen-ctr-data failed:\n%s\n", gen.out.c_str());
    return 1;
  }
  const double planted = ValueAfter(gen.out, "planted_auc=");
  const std::string data =
      absl::StrCat(" --optimizer lazy_adam --lr 0.003 --data_feed ", dir, "/data_feed.prototxt --files '", dir,
                   "/train/*' --test_files '", dir, "/test/*'");
  std::printf("ctr_bench: ctr_dnn, 1 epoch of %ld generated examples (batch 64, lazy_adam 0.003); planted_auc=%.4f\n",
              examples, planted);
  struct Run {
    const char* what;
    std::string args;
  };
  for (const Run& run : {Run{"single process, 2 threads", "async-train --model ctr_dnn --threads 2" + data},
                         Run{"2 pservers x 2 async trainers, table distributed",
                             "launch --pservers 2 --trainers 2 --async --model ctr_dnn_dist" + data}}) {
    Result r = Oar(run.args);
    if (r.code != 0) {
      std::fprintf(stderr, "%s failed:\n%s\n", run.what, Tail(r.out).c_str());
      return 1;
    }
    const double auc = ValueAfter(r.out, "test_auc=");
    std::printf("  %-48s test_auc=%.4f, %.4f below planted (target <= 0.02)\n", run.what, auc, planted - auc);
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace oar::bench
