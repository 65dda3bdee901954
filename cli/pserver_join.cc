#include "cli/pserver_join.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status.h"

namespace oar::cli {
namespace {

// Whether etcd says the job is over; when it does, says so and sets *ended.
bool SaysEnded(const ElasticJob& job, bool* ended) {
  absl::StatusOr<bool> over = ElasticJobOver(job);
  if (!over.ok() || !*over) return false;  // etcd unreachable: the caller's own wait decides
  std::fprintf(stderr, "%s: the job ended before this trainer joined its pservers' steps; nothing to train\n",
               job.member.c_str());
  *ended = true;
  return true;
}

absl::Status Ended() { return absl::CancelledError("the elastic job ended before this trainer joined it"); }

}  // namespace

absl::Status WaitForElasticPservers(const ElasticJob& job, rpc::RpcClient* client,
                                    const std::vector<std::string>& pservers, bool* ended) {
  absl::Status ready = client->WaitServerReady(pservers, client->deadline_ms(), [&] { return SaysEnded(job, ended); });
  return *ended ? Ended() : ready;
}

absl::Status JobEndedOr(const ElasticJob& job, absl::Status failed, bool* ended) {
  if (failed.ok()) return failed;
  const absl::Time until = absl::Now() + absl::Seconds(1);
  while (true) {
    if (SaysEnded(job, ended)) return Ended();
    if (absl::Now() >= until) return failed;
    absl::SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace oar::cli
