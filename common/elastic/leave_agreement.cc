#include "common/elastic/leave_agreement.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/status.h"

namespace oar::elastic {

absl::StatusOr<int64_t> AgreeOnLastStep(EtcdClient* etcd, const std::string& job, const std::string& leave, int pserver,
                                        int pservers, const StepView& mine, int64_t none, absl::Duration timeout) {
  const std::string prefix = absl::StrCat("/oar/", job, "/leaves/", leave, "/");
  OAR_RETURN_IF_ERROR(etcd->Put(absl::StrCat(prefix, pserver), absl::StrCat(mine.step, " ", mine.contributed ? 1 : 0,
                                                                            " ", mine.contributed_before ? 1 : 0))
                          .status());
  const absl::Time until = absl::Now() + timeout;
  while (true) {
    OAR_ASSIGN_OR_RETURN(const EtcdRange records, etcd->GetPrefix(prefix));
    std::set<int> from;
    int64_t last = none;
    for (const EtcdKv& kv : records.kvs) {
      int ps = -1;
      std::vector<std::string> f = absl::StrSplit(kv.value, ' ');
      int64_t step = 0;
      int contributed = 0, before = 0;
      if (!absl::SimpleAtoi(kv.key.substr(prefix.size()), &ps) || f.size() != 3 || !absl::SimpleAtoi(f[0], &step) ||
          !absl::SimpleAtoi(f[1], &contributed) || !absl::SimpleAtoi(f[2], &before)) {
        return absl::DataLossError(absl::StrCat("etcd ", kv.key, " = '", kv.value, "' is not a pserver's record"));
      }
      from.insert(ps);
      if (contributed) last = std::max(last, step);
      if (before) last = std::max(last, step - 1);
    }
    if (static_cast<int>(from.size()) >= pservers) return last;
    if (absl::Now() >= until) {
      std::vector<int> missing;
      for (int p = 0; p < pservers; ++p) {
        if (!from.count(p)) missing.push_back(p);
      }
      return absl::DeadlineExceededError(
          absl::StrCat("pserver(s) ", absl::StrJoin(missing, ", "), " recorded nothing under ", prefix, " in ",
                       absl::FormatDuration(timeout), " (each pserver records what it saw of a trainer that left)"));
    }
    absl::SleepFor(absl::Milliseconds(5));  // the others see the leave about when this one does
  }
}

}  // namespace oar::elastic
