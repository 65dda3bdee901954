// A pserver job's trainers joined for the global shuffle; see shuffle_ring.h.
//
// Thread-safety: blocks the calling thread.
#include "cli/shuffle_ring.h"

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "trainer/collective/join_trainers.h"

namespace oar::cli {

absl::StatusOr<std::unique_ptr<Collective>> JoinTrainersForShuffle(const RoleEnv& env, Executor& exe) {
  if (static_cast<int>(env.trainer_endpoints.size()) != env.trainers || env.current_endpoint.empty()) {
    return absl::InvalidArgumentError(
        "--shuffle global of MultiSlot files in a pserver job exchanges lines between the trainers, which needs "
        "their endpoints: set PADDLE_TRAINER_ENDPOINTS and each trainer's PADDLE_CURRENT_ENDPOINT (oar launch "
        "does), or use --shuffle local");
  }
  std::vector<std::string> others;
  for (const std::string& ep : env.trainer_endpoints) {
    if (ep != env.current_endpoint) others.push_back(ep);
  }
  ProgramDesc p;
  VarDesc* id_var = p.MutableBlock(0)->Var("NCCLID");  // persistable: it stays in `scope` after the run
  id_var->type = paddle::framework::proto::VarType::RAW;
  id_var->persistable = true;
  OpDesc* op = p.MutableBlock(0)->AppendOp();
  op->type = "gen_nccl_id";
  op->outputs["NCCLID"] = {"NCCLID"};
  op->SetAttr("endpoint", env.current_endpoint);
  op->SetAttr("endpoint_list", others);
  op->SetAttr("trainer_id", static_cast<int32_t>(env.trainer_id));
  Scope scope;
  OAR_RETURN_IF_ERROR(Annotate(exe.Run(p, &scope).status(), "joining the trainers for the global shuffle"));
  const Variable* id = scope.FindVar("NCCLID");
  JoinOptions join;
  join.id = id != nullptr && id->IsType<Tensor>() ? &id->Get<Tensor>() : nullptr;
  join.rank = env.trainer_id;
  join.endpoints = env.trainer_endpoints;
  auto ring = JoinTrainers(join);
  if (!ring.ok()) return Annotate(ring.status(), "joining the trainers for the global shuffle");
  return ring;
}

}  // namespace oar::cli
