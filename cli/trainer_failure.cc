#include "cli/trainer_failure.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/transport_select.h"

namespace oar::cli {
namespace {

std::atomic<bool> completed{false};

}  // namespace

uint64_t ThisTrainersIncarnation() {
  static const uint64_t incarnation = rpc::NewIncarnation();
  return incarnation;
}

void NoteTrainerCompleted() { completed.store(true); }

void TellPserversThisTrainerFailed(const RoleEnv& env, const absl::Status& why) {
  if (why.ok() || env.role != RoleEnv::Role::kTrainer || env.pservers.empty() || completed.load()) return;
  std::unique_ptr<rpc::Transport> transport = rpc::MakeTransport();  // --rpc_transport, TLS, OAR_AUTH_TOKEN
  rpc::RpcClient client(transport.get(), {.incarnation = ThisTrainersIncarnation()});
  std::vector<std::shared_ptr<rpc::RpcCall>> calls;
  for (const auto& ep : env.pservers)
    calls.push_back(client.AsyncSendAbort(ep, env.trainer_id, std::string(why.message())));
  int told = 0;
  for (auto& c : calls) told += c->Wait().ok() ? 1 : 0;
  if (told > 0) {  // an echo of a pserver's "trainer N failed, so the job stops" passes that on
    const bool echo = absl::StrContains(why.message(), rpc::kJobStops);
    std::fprintf(stderr, "trainer %d: told %d of %zu pserver(s) that %s, so the job stops\n", env.trainer_id, told,
                 env.pservers.size(), echo ? "another trainer failed" : "it failed");
  }
}

}  // namespace oar::cli
