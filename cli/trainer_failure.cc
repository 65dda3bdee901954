#include "cli/trainer_failure.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/rpc_flags.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/status_payloads.h"
#include "common/rpc/transport_select.h"

namespace oar::cli {
namespace {

std::atomic<bool> completed{false};
std::atomic<bool> taken_out{false};

}  // namespace

uint64_t ThisTrainersIncarnation() {
  static const uint64_t incarnation = rpc::NewIncarnation();
  return incarnation;
}

void NoteTrainerCompleted() { completed.store(true); }

bool WasTakenOut() { return taken_out.load(); }

void TellPserversThisTrainerFailed(const RoleEnv& env, const absl::Status& why) {
  if (why.ok() || env.role != RoleEnv::Role::kTrainer || env.pservers.empty() || completed.load()) return;
  if (absl::StrContains(why.message(), rpc::kLeftTheJob)) {  // an elastic job took it out: the others go on
    taken_out.store(true);
    std::fprintf(stderr,
                 "trainer %d: the job's pservers took this trainer out (it was cut off, stopped or stuck for "
                 "longer than its lease); the job goes on without it\n",
                 env.trainer_id);
    return;
  }
  auto made = rpc::MakeTransport(RpcOptionsFromFlags());  // --rpc_transport, TLS, OAR_AUTH_TOKEN
  if (!made.ok()) return;                                 // the flag was checked at parsing: never
  std::unique_ptr<rpc::Transport> transport = *std::move(made);
  rpc::RpcClient client(transport.get(), {.incarnation = ThisTrainersIncarnation()});
  std::vector<std::shared_ptr<rpc::RpcCall>> calls;
  for (const auto& ep : env.pservers) calls.push_back(client.AsyncSendAbort(ep, env.trainer_id, why));
  int told = 0;
  for (auto& c : calls) told += c->Wait().ok() ? 1 : 0;
  if (told > 0) {  // a pserver's answer naming another trainer's failure: this trainer passes that on
    const std::optional<int> heard = rpc::JobStoppedBy(why);
    std::fprintf(stderr, "trainer %d: told %d of %zu pserver(s) that %s, so the job stops\n", env.trainer_id, told,
                 env.pservers.size(),
                 heard.has_value() ? absl::StrCat("trainer ", *heard, " failed").c_str() : "it failed");
  }
}

}  // namespace oar::cli
