#include "cli/host_share.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc/rpc_common.h"

namespace oar::cli {

absl::StatusOr<std::vector<std::vector<int>>> TrainerCpus(const std::vector<int>& allowed, int trainers, int processes,
                                                          int mode) {
  const int n = static_cast<int>(allowed.size());
  std::vector<std::vector<int>> out(static_cast<size_t>(std::max(trainers, 0)));
  if (mode < -1 || mode > 1) {
    return absl::InvalidArgumentError(absl::StrCat("--bind_trainers is 1, 0 or -1 (auto), got ", mode));
  }
  if (mode == 0 || trainers < 1 || n == 0) return out;
  if (trainers > n) {
    if (mode == -1) return out;
    return absl::InvalidArgumentError(absl::StrCat("--bind_trainers=1: ", trainers, " trainers but ", n,
                                                   " CPUs to run on (", CpuListText(allowed),
                                                   "); each trainer needs one of its own: lower --trainers or drop "
                                                   "--bind_trainers"));
  }
  if (mode == -1 && processes <= n) return out;
  int next = 0;
  for (int t = 0; t < trainers; ++t) {
    const int share = n / trainers + (t < n % trainers ? 1 : 0);
    for (int k = 0; k < share; ++k) out[static_cast<size_t>(t)].push_back(allowed[static_cast<size_t>(next++)]);
  }
  return out;
}

Tuning ChildTuning(int processes, int cpus, const UserTuning& user) {
  Tuning t;
  // Each its share of the CPUs for BLAS: OpenBLAS threads spin while their
  // process waits on the network, taking the CPUs the others need.
  if (!user.blas_threads) t.env.emplace_back("OPENBLAS_NUM_THREADS", std::to_string(std::max(1, cpus / processes)));
  if (!user.batch_wakeups && processes > cpus) t.flags.push_back("--rpc_shm_batch_wakeups=1");
  if (!user.shm_spin) t.flags.push_back(absl::StrCat("--rpc_shm_spin_us=", rpc::JobSpinMicros(processes, cpus)));
  return t;
}

absl::StatusOr<std::string> ShareHost(std::vector<ChildSpec>* specs, int pservers, int trainers, int bind_mode,
                                      const UserTuning& user) {
  const std::vector<int> cpus = AllowedCpus();
  const Tuning tuning = ChildTuning(pservers + trainers, static_cast<int>(cpus.size()), user);
  for (ChildSpec& s : *specs) {
    s.argv.insert(s.argv.end(), tuning.flags.begin(), tuning.flags.end());
    s.env.insert(s.env.end(), tuning.env.begin(), tuning.env.end());
  }
  absl::StatusOr<std::vector<std::vector<int>>> bound = TrainerCpus(cpus, trainers, pservers + trainers, bind_mode);
  if (!bound.ok()) return bound.status();
  std::vector<std::string> lists;
  for (int i = 0; i < trainers; ++i) {
    const std::vector<int>& mine = (*bound)[static_cast<size_t>(i)];
    (*specs)[static_cast<size_t>(pservers + i)].cpus = mine;
    if (!mine.empty()) lists.push_back(CpuListText(mine));
  }
  if (lists.empty()) return std::string();
  return absl::StrCat("trainers bound to CPUs ", absl::StrJoin(lists, " | "),
                      " (one list each), the pservers on any (--bind_trainers=0: none bound)");
}

std::string CpuListText(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    absl::StrAppend(&text, text.empty() ? "" : ",", cpus[i]);
    if (j > i) absl::StrAppend(&text, "-", cpus[j]);
    i = j + 1;
  }
  return text;
}

}  // namespace oar::cli
