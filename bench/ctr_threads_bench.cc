// ctr_bench's AsyncExecutor section (issue 16): ctr_dnn (local table,
// Adagrad) trained from MultiSlot files by 1 and then 2 AsyncExecutor
// threads, alternating, on the same 4 files; examples/s of each and the
// ratio (target: 2 threads >= 1.7x 1 thread on 2 cores).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "bench/ctr_files.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/base/blas.h"
#include "common/framework/executor.h"
#include "examples/model_zoo.h"
#include "glog/logging.h"
#include "trainer/async_executor.h"

namespace oar::bench {

int RunThreadsBench() {
  std::vector<std::string> files;
  for (int f = 0; f < 4; ++f) {
    files.push_back(absl::StrCat("/tmp/oar_ctr_threads_", ::getpid(), "_", f));
    WriteCtrFile(files.back(), 4000, 11 + f);
  }
  UniqueNameGuard names;
  Program main, startup;
  {
    ProgramGuard g(&main, &startup);
    BuiltModel m = FindModel("ctr_dnn")->build();
    optimizer::Adagrad(0.01f).minimize(m.loss);
  }
  CHECK(main.status().ok()) << main.status();
  const DataFeedDesc feed = CtrDesc(64);
  std::vector<double> rate[3];
  const int blas_default = GetBlasThreads();
  for (int round = 0; round < 3; ++round) {
    for (int threads : {1, 2}) {
      Scope root;
      CHECK(Executor().Run(startup.desc(), &root).ok());
      SetBlasThreads(threads > 1 ? 1 : blas_default);  // as the role does (cli/process_settings.h)
      AsyncExecutor async(&root);
      const auto start = std::chrono::steady_clock::now();
      auto r = async.Run(main.desc(), feed, files, threads, {});
      CHECK(r.ok()) << r.status();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      rate[threads].push_back(r->instances / s);
    }
  }
  for (const auto& f : files) std::remove(f.c_str());
  std::vector<double> ratio;
  for (size_t i = 0; i < rate[1].size(); ++i) ratio.push_back(rate[2][i] / rate[1][i]);
  std::printf(
      "ctr_bench: AsyncExecutor, ctr_dnn (Adagrad, local table) on 16000 examples in 4 files, batch 64, "
      "median of 3\n");
  std::printf(
      "  1 thread %.0f examples/s; 2 threads %.0f examples/s -> %.2fx (target >= 1.70x; this host has %u "
      "cores)\n",
      Median(rate[1]), Median(rate[2]), Median(ratio), std::thread::hardware_concurrency());
  return 0;
}

}  // namespace oar::bench
