#include "cli/elastic_sync.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace oar::cli {

absl::StatusOr<int64_t> JoinPserverSteps(rpc::RpcClient* client, const std::vector<std::string>& pservers,
                                         int trainer_id, const std::string& member) {
  constexpr int kTries = 20;
  absl::Status last;
  for (int attempt = 1; attempt <= kTries; ++attempt) {
    std::vector<int64_t> held(pservers.size(), 0);
    std::vector<std::shared_ptr<rpc::RpcCall>> calls;
    for (size_t i = 0; i < pservers.size(); ++i) {
      calls.push_back(client->AsyncSendJoinHold(pservers[i], trainer_id, &held[i]));
    }
    OAR_RETURN_IF_ERROR(Annotate(rpc::WaitAll(calls), "asking the pservers to hold a step for this trainer"));
    const int64_t entry = *std::max_element(held.begin(), held.end());
    calls.clear();
    for (const std::string& ep : pservers) calls.push_back(client->AsyncSendJoin(ep, trainer_id, entry, member));
    last = rpc::WaitAll(calls);
    if (last.ok()) {
      std::fprintf(stderr, "trainer %d joined the pservers' steps at step %lld\n", trainer_id,
                   static_cast<long long>(entry));
      return entry;
    }
    // Too late at some pserver, or an earlier run of this id still leaving:
    // the pservers that took the JOIN wait for its FETCH_BARRIER at a step
    // that another never counts it in; holding again re-counts it at all.
    if (!absl::IsFailedPrecondition(last) && !absl::IsUnavailable(last)) break;
    absl::SleepFor(absl::Milliseconds(std::min(1000, 50 * attempt)));
  }
  return Annotate(last, absl::StrCat("trainer ", trainer_id, " joining the pservers' steps"));
}

absl::StatusOr<ProgramDesc> IdleStepProgram(const ProgramDesc& trainer_program) {
  const BlockDesc& main = trainer_program.Block(0);
  size_t from = main.OpSize();
  for (size_t i = 0; i < main.OpSize(); ++i) {
    if (main.Op(i).type == "send_barrier") {
      from = i;
      break;
    }
  }
  if (from == main.OpSize()) {
    return absl::InvalidArgumentError(
        "an elastic sync trainer's program has no send_barrier: it is not a sync pserver-mode trainer program");
  }
  ProgramDesc idle(trainer_program);
  idle.MutableBlock(0)->RemoveOps(0, from);
  return idle;
}

}  // namespace oar::cli
